"""Importing ``model.py`` the way Triton's stub does, and formatting Python errors as it does.

The stub imports ``<model_dir>/<version>/<file>`` as the module ``<version>.<stem>`` with
the version and model directories on ``sys.path``. Every model is a ``1.model``, so in
one process each import gets its own module object and the ``<version>`` package entries
are taken out of ``sys.modules`` again afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from pathlib import Path

import triton_python_backend_utils as _pb_utils

__all__ = ["format_exception", "import_model_module", "install_pb_utils"]

_IMPORT_LOCK = threading.Lock()
PB_UTILS_NAME = "triton_python_backend_utils"


def install_pb_utils() -> None:
    """Make ``import triton_python_backend_utils`` (and Triton's ``c_python_backend_utils``)
    resolve to our module."""
    sys.modules.setdefault(PB_UTILS_NAME, _pb_utils)
    sys.modules.setdefault("c_python_backend_utils", _pb_utils)


def import_model_module(
    model_dir: Path, version: int, filename: str, own_process: bool = False
) -> types.ModuleType:
    """A fresh module object for ``<model_dir>/<version>/<filename>`` (raises what it raises).

    ``own_process``: the model has this interpreter to itself (a worker process), so its
    package and ``sys.path`` entries stay, as in Triton's stub; otherwise they are taken
    out again so models sharing the server's interpreter do not see each other's files.
    """
    install_pb_utils()
    version_dir = model_dir / str(version)
    path = version_dir / filename
    package_name = str(version)
    module_name = f"{package_name}.{filename[:-3]}"
    with _IMPORT_LOCK:
        saved = {
            k: sys.modules.pop(k)
            for k in list(sys.modules)
            if k == package_name or k.startswith(package_name + ".")
        }
        spec = importlib.machinery.ModuleSpec(package_name, None, is_package=True)
        spec.submodule_search_locations = [str(version_dir)]
        sys.modules[package_name] = importlib.util.module_from_spec(spec)
        added = [p for p in (str(version_dir), str(model_dir)) if p not in sys.path]
        sys.path.extend(added)
        try:
            if not path.is_file():
                raise ModuleNotFoundError(f"No module named '{module_name}'")
            sys.path_importer_cache.pop(str(version_dir), None)  # (a file may be new)
            # the import statement's own way in, as the stub's: a failing import lists
            # the frames of importlib's _find_and_load as in Triton
            __import__(module_name)
            return sys.modules[module_name]
        finally:
            if own_process:
                saved.clear()
                added.clear()
            for k in [
                k for k in sys.modules if k == package_name or k.startswith(package_name + ".")
            ]:
                if not own_process:
                    del sys.modules[k]
            sys.modules.update(saved)
            for p in added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(p)


_SERVER_DIR = str(Path(__file__).resolve().parents[2])
_PB_DIR = str(Path(_pb_utils.__file__).resolve().parent)
_MAX_FRAMES = 1000


def _ours(filename: str) -> bool:
    """A frame of the server or of pb_utils (C++ in Triton, so never shown)."""
    return filename.startswith((_SERVER_DIR, _PB_DIR))


def format_exception(exc: BaseException) -> str:
    """``<Type>: <message>\\n\\nAt:\\n  <file>(<line>): <function>\\n...``, innermost first.

    As the stub's pybind11 formats it: from the innermost frame of the traceback that is
    not pb_utils' own, outwards through each frame's caller (``f_back``) with the line it
    is at, up to the code that called into the model. Which callers a finished frame
    still knows depends on the interpreter: out of an ``async def execute`` run on the
    event-loop thread, Python 3.12 and later list the loop's and the thread's frames
    after ``execute``, Python 3.11 and earlier stop at the innermost coroutine, in Triton
    as here (the loop thread is built the same way). The server's own frames end it.
    """
    text = f"{type(exc).__name__}: {str(exc) or '<EMPTY MESSAGE>'}"
    if isinstance(exc, SyntaxError):
        return text
    innermost: types.FrameType | None = None
    tb = exc.__traceback__
    while tb is not None:
        if not _ours(tb.tb_frame.f_code.co_filename):
            innermost = tb.tb_frame
        tb = tb.tb_next
    lines: list[str] = []
    frame = innermost
    while frame is not None and len(lines) < _MAX_FRAMES:
        filename = frame.f_code.co_filename
        if _ours(filename):
            break
        lines.append(f"  {filename}({frame.f_lineno}): {frame.f_code.co_name}\n")
        frame = frame.f_back
    if not lines:
        return text
    return f"{text}\n\nAt:\n{''.join(lines)}"
