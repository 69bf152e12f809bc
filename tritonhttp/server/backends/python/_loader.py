"""Importing ``model.py`` the way Triton's stub does, and formatting Python errors as it does.

The stub imports ``<model_dir>/<version>/<file>`` as the module ``<version>.<stem>`` with
the version and model directories on ``sys.path``. Every model is a ``1.model``, so in
one process each import gets its own module object and the ``<version>`` package entries
are taken out of ``sys.modules`` again afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
import traceback
import types
from pathlib import Path

from . import _pb_utils

__all__ = ["format_exception", "import_model_module"]

_IMPORT_LOCK = threading.Lock()
PB_UTILS_NAME = "triton_python_backend_utils"


def install_pb_utils() -> None:
    """Make ``import triton_python_backend_utils`` resolve to our module."""
    sys.modules[PB_UTILS_NAME] = _pb_utils
    sys.modules["c_python_backend_utils"] = _pb_utils


def import_model_module(model_dir: Path, version: int, filename: str) -> types.ModuleType:
    """A fresh module object for ``<model_dir>/<version>/<filename>`` (raises what it raises)."""
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
        package = types.ModuleType(package_name)
        package.__path__ = [str(version_dir)]
        package.__package__ = package_name
        sys.modules[package_name] = package
        added = [p for p in (str(version_dir), str(model_dir)) if p not in sys.path]
        sys.path.extend(added)
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return module
        finally:
            for k in [
                k for k in sys.modules if k == package_name or k.startswith(package_name + ".")
            ]:
                del sys.modules[k]
            sys.modules.update(saved)
            for p in added:
                with contextlib.suppress(ValueError):
                    sys.path.remove(p)


_SERVER_DIR = str(Path(__file__).resolve().parents[2])
_RUNTIME_PARTS = ("concurrent/futures/", "asyncio/", "threading.py")


def _is_server_frame(filename: str) -> bool:
    return filename.startswith(_SERVER_DIR) or any(p in filename for p in _RUNTIME_PARTS)


def format_exception(exc: BaseException, skip: int = 0) -> str:
    """``<Type>: <message>\\n\\nAt:\\n  <file>(<line>): <function>\\n...``, innermost first.

    The server's own frames (and the thread/asyncio machinery) at the outer end of the
    traceback are left out, as if the model had been called directly; ``skip`` drops more.
    """
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, SyntaxError):
        return text
    frames = list(traceback.extract_tb(exc.__traceback__))
    while frames and _is_server_frame(frames[0].filename):
        frames.pop(0)
    frames = frames[skip:]
    if not frames:
        return text
    lines = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    return f"{text}\n\nAt:\n{lines}"
