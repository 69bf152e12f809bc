"""Entry point of a worker process:
``python -I _worker_boot.py <ctl fd> <fd fd> <server pid> <triton_python_backend_utils dir>
[<reply codec module>]``, and of the worker zygote (:mod:`._forkserver`):
``python -I _worker_boot.py --zygote <socket fd> <server pid>
<triton_python_backend_utils dir> [<reply codec module>]``, which loads the same and then
forks workers on the server's request; each forked child goes on here as a worker
started the first way would (its parent being the zygote).

Loads only what a worker needs, by file location, without running the ``tritonhttp``
package's ``__init__`` (the client, uvicorn, protobuf and prometheus_client stay out,
and an interpreter from ``EXECUTION_ENV_PATH`` needs nothing but numpy). The package
names used for that are taken out of ``sys.modules`` again before any model code runs,
so models may ``import tritonhttp`` themselves. The reply codec (the module the
server names for writing answers to clients, see ``_direct.py``) is imported here too,
under the same package names, and handed to the worker; the zygote imports each codec
its workers are asked with the same way, once.
"""

import importlib
import importlib.util
import os
import sys
import types

_HERE = os.path.dirname(os.path.abspath(__file__))
#: the modules of the boot's package names, while they are out of ``sys.modules``
_LOADED: dict[str, types.ModuleType] = {}


def _packages() -> None:
    """Put the boot's package names in ``sys.modules`` (their ``__init__`` never runs)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    packages = {
        "tritonhttp": os.path.join(root, "tritonhttp"),
        "tritonhttp.utils": os.path.join(root, "tritonhttp", "utils"),
        "tritonhttp.server": os.path.join(root, "tritonhttp", "server"),
        "tritonhttp.server.core": os.path.join(root, "tritonhttp", "server", "core"),
        "tritonhttp.server.front": os.path.join(root, "tritonhttp", "server", "front"),
        "tritonhttp.server.http": os.path.join(root, "tritonhttp", "server", "http"),
        "tritonhttp.server.support": os.path.join(root, "tritonhttp", "server", "support"),
        "tritonhttp.server.backends": os.path.join(root, "tritonhttp", "server", "backends"),
        "tritonhttp.server.backends.python": _HERE,
    }
    for name, path in packages.items():
        module = types.ModuleType(name)
        module.__path__ = [path]
        module.__package__ = name
        sys.modules[name] = module


def _put_away() -> None:
    """Take the boot's package names (and what was imported under them) out of
    ``sys.modules``, kept for :func:`_import_codec`."""
    for name in [n for n in sys.modules if n == "tritonhttp" or n.startswith("tritonhttp.")]:
        _LOADED[name] = sys.modules.pop(name)


def _import_codec(name: str) -> types.ModuleType | None:
    """The reply codec ``name``, imported under the boot's package names (None: none, or
    it cannot be imported here)."""
    if not name:
        return None
    sys.modules.update(_LOADED)
    try:
        return importlib.import_module(name)
    except ImportError:  # (an EXECUTION_ENV_PATH interpreter may lack what it needs)
        return None
    finally:
        _put_away()


def _load_pb_utils(pb_dir: str) -> None:
    spec = importlib.util.spec_from_file_location(
        "triton_python_backend_utils",
        os.path.join(pb_dir, "__init__.py"),
        submodule_search_locations=[pb_dir],
    )
    assert spec is not None and spec.loader is not None
    pb_utils = importlib.util.module_from_spec(spec)
    sys.modules["triton_python_backend_utils"] = pb_utils
    spec.loader.exec_module(pb_utils)
    sys.modules["c_python_backend_utils"] = pb_utils


def _boot() -> int:
    if sys.path and sys.path[0] == _HERE:
        del sys.path[0]
    _packages()
    _load_pb_utils(sys.argv[4])
    from tritonhttp.server.backends.python import _forkserver, _worker

    _put_away()
    codec = _import_codec(sys.argv[5] if len(sys.argv) > 5 else "")
    if sys.argv[1] == "--zygote":
        child = _forkserver.serve(sys.argv[2:], codec, _import_codec)
        if child is None:
            return 0
        sys.argv[1:], codec = child  # (a forked child: a worker from here on)
    return _worker.main(sys.argv[1:], codec)


if __name__ == "__main__":
    sys.exit(_boot())
