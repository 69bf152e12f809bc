#!/usr/bin/env bash
# Run the CUDA shared-memory tests in one go on a GPU machine: the client utils
# (tests/shm/test_cuda_*.py) and the bundled server's CUDA regions (tests/shm/
# test_server_cuda_*.py: our client creates regions, the server -- another process --
# opens them with cudaIpcOpenMemHandle, reads inputs from them and writes outputs to them).
#
#   scripts/gpu-check.sh                      # online: makes .venv-gpu, installs, tests
#   WHEELHOUSE=.gpu-wheels scripts/gpu-check.sh  # offline: only from .gpu-wheels/
#   scripts/gpu-check.sh --download .gpu-wheels [CUDA_MAJOR] [PYTHON_VERSION]
#                                             # on a machine with PyPI: fill the folder for
#                                             # an offline GPU machine (default 12 and 13, and
#                                             # this machine's Python version)
#
# The GPU tests must not skip: TRITONHTTP_REQUIRE_GPU=1 turns "no usable GPU" into a failure.
# Tests against real Triton (which needs nvidia-pytriton, i.e. network or its cached venv)
# run only with GPU_CHECK_REAL_TRITON=1. Exit status: pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# the tests, tritonhttp's core (the clients) and the bundled server's dependencies
TEST_DEPS=(numpy ml_dtypes pytest pytest-timeout python-rapidjson httptools httpx
           uvicorn uvloop protobuf prometheus_client)

if [ "${1:-}" = "--download" ]; then
    dest="${2:?usage: $0 --download DIR [CUDA_MAJOR] [PYTHON_VERSION]}"
    majors="${3:-12 13}"
    pyver="${4:-$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}"
    mkdir -p "$dest"
    for major in $majors; do
        "$PY" -m pip download -q -d "$dest" --only-binary=:all: --python-version "$pyver" \
            --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
            "cuda-bindings==${major}.*" "${TEST_DEPS[@]}"
    done
    echo "wheels for Python $pyver (CUDA ${majors}) in $dest: $(du -sh "$dest" | cut -f1)"
    exit 0
fi

echo "== GPU"
if ! command -v nvidia-smi >/dev/null; then
    echo "nvidia-smi not found: this is not a GPU machine" >&2
    exit 2
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
cuda_major="$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)"
cuda_major="${cuda_major:-12}"
echo "driver supports CUDA $cuda_major"

echo "== environment (.venv-gpu)"
[ -x .venv-gpu/bin/python ] || "$PY" -m venv --system-site-packages .venv-gpu
pip=(.venv-gpu/bin/python -m pip install -q --disable-pip-version-check)
if [ -n "${WHEELHOUSE:-}" ]; then
    pip+=(--no-index --find-links "$WHEELHOUSE")
fi
# cuda-bindings is what `import cuda.bindings.runtime` needs (the cuda-python extra pulls it
# in); pick the major release the driver supports. tritonhttp itself runs from the checkout
# (PYTHONPATH), so nothing has to be built.
if ! "${pip[@]}" "cuda-bindings==${cuda_major}.*" "${TEST_DEPS[@]}"; then
    echo "warning: pip could not install everything; trying with what is there" >&2
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
.venv-gpu/bin/python - <<'PYCHECK'
import numpy, ml_dtypes, pytest, httpx, uvicorn  # noqa: F401
import tritonhttp.server  # noqa: F401
from cuda.bindings import runtime as cudart
import tritonhttp.utils.cuda_shared_memory  # noqa: F401
error, count = cudart.cudaGetDeviceCount()
print(f"cuda-python sees {count} device(s) ({error.name})")
PYCHECK

echo "== CUDA shared-memory tests"
marks="not real_triton"
[ "${GPU_CHECK_REAL_TRITON:-0}" = "1" ] && marks=""
export TRITONHTTP_REQUIRE_GPU=1
exec .venv-gpu/bin/python -m pytest -p no:cacheprovider -q -rs --timeout 120 \
    ${marks:+-m "$marks"} tests/shm/test_cuda_unit.py tests/shm/test_cuda_gpu.py \
    tests/shm/test_server_cuda_unit.py tests/shm/test_server_cuda_gpu.py "$@"
