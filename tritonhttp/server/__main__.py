"""``python -m tritonhttp.server``: serve a model repository like tritonserver."""

from __future__ import annotations

import sys

from ._options import OptionsError, parse_args
from ._server import run


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv)
    except OptionsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
