"""Test model repositories whose model files are written once.

Several repositories under ``tests/repos`` need the same model file in many places (the
scheduling probes, ``add_sub`` next to failing models, an example model). There, a file
``NAME.from`` stands for the file ``NAME``: its one line is the path, from the project root,
of the file to put there. :func:`materialise` copies a repository into a scratch folder and
puts every such file in place, so that real Triton and our server both load plain files
(no links: real Triton, packaging and some git checkouts do not follow them).

Tests get a materialised repository from the ``model_repo`` fixture (``tests/conftest.py``);
a repository with no ``.from`` file can be served from where it is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["ECHO_MODEL", "PROJECT", "REPOS", "SUFFIX", "materialise"]

PROJECT = Path(__file__).resolve().parent.parent
REPOS = PROJECT / "tests" / "repos"
#: ending of the files that name the source of a file
SUFFIX = ".from"

#: the source of a Python model that answers each request's input ``IN`` as ``OUT``
ECHO_MODEL = (REPOS / "_sources" / "echo.py").read_text()


def materialise(name: str, into: Path) -> Path:
    """Copy ``tests/repos/<name>`` to ``into/<name>`` with every ``.from`` file resolved."""
    repo = into / name
    shutil.copytree(REPOS / name, repo, ignore=shutil.ignore_patterns("__pycache__"))
    for stand_in in sorted(repo.rglob(f"*{SUFFIX}")):
        source = PROJECT / stand_in.read_text().strip()
        if not source.is_file() or source.name.endswith(SUFFIX):
            where = stand_in.relative_to(into)
            raise FileNotFoundError(f"{where} names {source}, which is not a model file")
        shutil.copyfile(source, stand_in.with_name(stand_in.name[: -len(SUFFIX)]))
        stand_in.unlink()
    return repo
