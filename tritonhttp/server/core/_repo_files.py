"""The model repositories on disk: model folders and their version folders, a folder's
signature (how a load tells that its files changed), version numbers as requests name
them, and the private temp copy that ``file:`` overrides of a load request are written to.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ._config import PollError
from ._errors import CoreError

__all__ = [
    "SEP",
    "TWO_FOLDERS",
    "NoSingleFolder",
    "dir_signature",
    "is_model_folder",
    "model_files",
    "parse_version",
    "single_folder",
    "version_numbers",
    "write_override_files",
]

log = logging.getLogger("tritonhttp.server")

#: between a repository and a model name in a namespaced model's key
SEP = "::"

#: why a model name found in several repositories cannot load
TWO_FOLDERS = "model appears in two or more repositories"

#: the largest version number (Triton's versions are int64)
_MAX_VERSION = 2**63 - 1


def dir_signature(path: Path) -> tuple[Any, ...]:
    """(path, mtime, size) of every file under ``path``, in a stable order."""
    items = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            items.append((p, st.st_mtime_ns, st.st_size))
    return tuple(items)


def model_files(signature: tuple[Any, ...], model_dir: Path) -> tuple[Any, ...]:
    """A folder signature without the model's configuration file (Triton tells a
    change of the configuration from one of the model's files)."""
    config = str(model_dir / "config.pbtxt")
    return tuple(item for item in signature if item[0] != config)


def is_model_folder(e: os.DirEntry[str]) -> bool:
    """Whether a repository's entry is a model folder."""
    return e.is_dir() and not e.name.startswith(".")


class NoSingleFolder(PollError):
    """No repository, or more than one, has a folder of the model's name."""


def single_folder(name: str, found: dict[str, list[Path]]) -> Path:
    """The one folder of model ``name`` among the repositories' (``found``: the
    repository's ``scan()``)."""
    dirs = found.get(name)
    if not dirs:
        raise NoSingleFolder(f"failed to find model '{name}' in the model repositories")
    if len(dirs) > 1:
        raise NoSingleFolder(TWO_FOLDERS)
    return dirs[0]


def version_numbers(model_dir: Path) -> list[int]:
    """The model's version folders, sorted: their names are plain numbers. Any other
    folder is skipped with Triton's warning (a number written with a leading zero too)."""
    found = []
    for p in model_dir.iterdir():
        if not p.is_dir():
            continue
        name = p.name
        if not (name.isascii() and name.isdigit()) or int(name) > _MAX_VERSION:
            log.warning(
                "ignore version directory '%s' which fails to convert to integral number", name
            )
        elif len(name) > 1 and name.startswith("0"):
            log.warning(
                "ignore version directory '%s' which contains leading zeros in its directory name",
                name,
            )
        else:
            found.append(int(name))
    return sorted(found)


def parse_version(text: str) -> int:
    """A version path segment as Triton reads it (``stol``: must fit a signed long)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value > 2**63 - 1:
        raise CoreError(
            f"failed to get model version from specified version string '{text}' (details: "
            "stol), version should be an integral value > 0"
        )
    if value < 0:
        raise CoreError(
            f"invalid model version specified '{text}' , version should be an integral value > 0"
        )
    return value


#: the base64 alphabet; a ``file:`` override's other characters are skipped
_B64_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _lenient_b64(text: str) -> bytes:
    """Base64 as Triton decodes a ``file:`` override: characters outside the alphabet
    (padding included) are skipped, a last group of two or three characters gives one or
    two bytes, a lone last character gives none."""
    kept = bytes(c for c in text.encode("utf-8", "surrogatepass") if c in _B64_CHARS)
    if len(kept) % 4 == 1:
        kept = kept[:-1]
    return base64.b64decode(kept + b"=" * (-len(kept) % 4))


def write_override_files(name: str, files: dict[str, str]) -> Path:
    """Write ``file:<relpath>`` overrides into a private temp copy (no path escapes).

    As in Triton, a path is joined under the copy (a leading or doubled ``/`` names the
    same file there) and the contents are decoded leniently (see :func:`_lenient_b64`)."""
    temp = Path(tempfile.mkdtemp(prefix=f"tritonhttp-{len(name)}-"))
    try:
        for rel, b64 in files.items():
            parts = [part for part in rel.split("/") if part]
            if not parts or rel.endswith("/") or "\\" in rel or ".." in parts:
                raise PollError(f"invalid file override path '{rel}'")
            target = temp.joinpath(*parts).resolve()
            if not target.is_relative_to(temp.resolve()):
                raise PollError(f"invalid file override path '{rel}'")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_lenient_b64(b64))
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return temp
