"""``EXECUTION_ENV_PATH``: run a model's workers with another Python environment.

The parameter names a conda-pack or venv archive (``.tar.gz``) or an unpacked
environment; a leading ``$$TRITON_MODEL_DIRECTORY`` is the model's folder. Archives are
unpacked once into ``$TRITONHTTP_CACHE/envs`` (default ``~/.cache/tritonhttp/envs``),
keyed by the archive's path, size and modification time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ...core._errors import Code, CoreError
from ...core.model_config_pb2 import ModelConfig
from ...support import _platform

__all__ = ["ExecutionEnv", "resolve_env"]

PARAMETER = "EXECUTION_ENV_PATH"
_MODEL_DIR = "$$TRITON_MODEL_DIRECTORY"


@dataclass(frozen=True)
class ExecutionEnv:
    """The interpreter and environment variables a model's workers run with."""

    root: Path
    python: str
    environ: dict[str, str]


def _cache_root() -> Path:
    base = os.environ.get("TRITONHTTP_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "tritonhttp") / "envs"


def _safe_members(archive: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    root = dest.resolve()
    members = []
    for m in archive.getmembers():
        target = (dest / m.name).resolve()
        if not target.is_relative_to(root) or m.isdev():
            raise CoreError(
                f"{PARAMETER}: archive member '{m.name}' would be written outside the "
                "environment folder",
                Code.INVALID_ARG,
            )
        members.append(m)
    return members


def _unpack(archive_path: Path) -> Path:
    st = archive_path.stat()
    key = hashlib.sha256(
        f"{archive_path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    ).hexdigest()[:24]
    root = _cache_root()
    target = root / key
    if (target / ".unpacked").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".unpacked").exists():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            with tarfile.open(archive_path, "r:*") as archive:
                members = _safe_members(archive, tmp)
                archive.extractall(tmp, members=members)
            (tmp / ".unpacked").write_text(str(archive_path))
            if target.exists():
                shutil.rmtree(target)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def resolve_env(config: ModelConfig, model_dir: Path) -> ExecutionEnv | None:
    """The model's execution environment (None without the parameter); raises CoreError."""
    param = config.parameters.get(PARAMETER)
    if param is None or not param.string_value:
        return None
    if not _platform.workers_supported():
        raise CoreError(
            f"{PARAMETER} needs worker processes, which are not supported on this platform "
            f"({_platform.system()}): models run in the server's process",
            Code.INVALID_ARG,
        )
    text = param.string_value
    if text.startswith(_MODEL_DIR):
        text = str(model_dir) + text[len(_MODEL_DIR) :]
    path = Path(os.path.normpath(text))
    if not path.exists():
        raise CoreError(
            f"{PARAMETER} '{param.string_value}' does not exist ({path})", Code.INVALID_ARG
        )
    try:
        root = path if path.is_dir() else _unpack(path)
    except (OSError, tarfile.TarError) as e:
        raise CoreError(f"failed to unpack the execution environment {path}: {e}") from None
    activate = root / "bin" / "activate"
    if not activate.exists():
        raise CoreError(
            f"Path {root}/bin/activate does not exist. The Python environment should contain "
            "an 'activate' script.",
            Code.INVALID_ARG,
        )
    python = next(
        (str(p) for p in (root / "bin" / "python3", root / "bin" / "python") if p.exists()), None
    )
    if python is None:
        raise CoreError(f"no Python interpreter in {root}/bin", Code.INVALID_ARG)
    env = dict(os.environ)
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    libs = [str(root / "lib"), env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libs if p)
    if (root / "pyvenv.cfg").exists():
        env["VIRTUAL_ENV"] = str(root)
    else:
        env["CONDA_PREFIX"] = str(root)
    with contextlib.suppress(KeyError):
        del env["PYTHONHOME"]
    return ExecutionEnv(root, python, env)
