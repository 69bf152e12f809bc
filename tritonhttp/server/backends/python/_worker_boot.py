"""Entry point of a worker process:
``python -I _worker_boot.py <ctl fd> <fd fd> <server pid> <triton_python_backend_utils dir>
[<reply codec module>]``.

Loads only what a worker needs, by file location, without running the ``tritonhttp``
package's ``__init__`` (the client, uvicorn, protobuf and prometheus_client stay out,
and an interpreter from ``EXECUTION_ENV_PATH`` needs nothing but numpy). The package
names used for that are taken out of ``sys.modules`` again before any model code runs,
so models may ``import tritonhttp`` themselves. The reply codec (the module the
server names for writing answers to clients, see ``_direct.py``) is imported here too,
under the same package names, and handed to the worker.
"""

import importlib.util
import os
import sys
import types


def _boot() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    if sys.path and sys.path[0] == here:
        del sys.path[0]
    packages = {
        "tritonhttp": os.path.join(root, "tritonhttp"),
        "tritonhttp.utils": os.path.join(root, "tritonhttp", "utils"),
        "tritonhttp.server": os.path.join(root, "tritonhttp", "server"),
        "tritonhttp.server.core": os.path.join(root, "tritonhttp", "server", "core"),
        "tritonhttp.server.front": os.path.join(root, "tritonhttp", "server", "front"),
        "tritonhttp.server.backends": os.path.join(root, "tritonhttp", "server", "backends"),
        "tritonhttp.server.backends.python": here,
    }
    for name, path in packages.items():
        module = types.ModuleType(name)
        module.__path__ = [path]
        module.__package__ = name
        sys.modules[name] = module
    pb_dir = sys.argv[4]
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
    from tritonhttp.server.backends.python import _worker

    codec = None
    if len(sys.argv) > 5 and sys.argv[5]:
        try:
            codec = importlib.import_module(sys.argv[5])
        except ImportError:  # (an EXECUTION_ENV_PATH interpreter may lack what it needs)
            codec = None
    for name in [n for n in sys.modules if n == "tritonhttp" or n.startswith("tritonhttp.")]:
        del sys.modules[name]
    return _worker.main(sys.argv[1:], codec)


if __name__ == "__main__":
    sys.exit(_boot())
