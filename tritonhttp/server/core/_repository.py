"""The model repository: discovery, versions, control modes, load and unload."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..support import _json
from ._backend_api import Backend, LoadContext, ModelInstance, runtime_check
from ._cache import ResponseCache
from ._config import (
    ModelConfig,
    PollError,
    config_to_json,
    first_subfolder,
    io_problem,
    normalize,
    normalize_instance_groups,
    parse_override,
    read_config,
    validate_load,
    validate_poll,
    version_policy_versions,
    wire_datatype,
)
from ._ensemble import EnsembleVersion, Lookup, check_steps, step_models, validate_graph
from ._errors import Code, CoreError
from ._model import ModelVersion
from ._rate_limit import RateLimiter
from ._summary import LatencySummaries
from ._warmup import warm_up
from .model_config_pb2 import ModelInstanceGroup

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = ["ModelEntry", "Repository"]

log = logging.getLogger("tritonhttp.server")

#: the reason of a version that was unloaded (a failed one keeps its own)
_UNLOADED = "unloaded"


@dataclass
class ModelEntry:
    """A model name the server manages, with every version it knows about."""

    name: str
    versions: dict[int, ModelVersion] = field(default_factory=dict)
    #: a version failed to load and nothing serves in its place, or the model never
    #: loaded: the server is not ready (strict readiness)
    failed: bool = False
    #: the last load left a version of its own failed: a load of the folder's unchanged
    #: files then loads again (else it keeps what serves)
    last_failed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    temp_dir: Path | None = None
    signature: tuple[Any, ...] = ()
    #: a load got past polling (the model then counts as known even with no version)
    attempted: bool = False
    model_dir: Path | None = None
    #: the configuration of the last load that succeeded (normalized, before the backend
    #: completes it)
    base_config: ModelConfig | None = None
    #: the versions a load in progress brings up where none of them serves: listed as
    #: LOADING meanwhile (a version that serves stays READY while its reload runs)
    loading: set[int] = field(default_factory=set)
    #: with namespacing: the repository of the model's folder (its namespace, where an
    #: ensemble's steps are looked up first)
    namespace: Path | None = None
    #: the model as log lines name it (``<repository>::<name>`` with namespacing)
    label: str = ""

    def ready_versions(self) -> list[ModelVersion]:
        return [v for _, v in sorted(self.versions.items()) if v.ready]

    def states(self) -> list[tuple[int, str, str]]:
        """(version, state, reason) of every version known, as the index lists them."""
        out = []
        for v in sorted(self.versions.keys() | self.loading):
            mv = self.versions.get(v)
            if mv is not None and (mv.ready or v not in self.loading):
                out.append((v, mv.state, mv.reason))
            else:
                out.append((v, "LOADING", ""))
        return out

    def settling(self) -> bool:
        """A version is loading or unloading (the server is not ready meanwhile)."""
        return any(state in ("LOADING", "UNLOADING") for _, state, _ in self.states())


def _dir_signature(path: Path) -> tuple[Any, ...]:
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


class Repository:
    """Knows every model of the repositories and the state of each loaded version."""

    def __init__(
        self,
        repositories: Iterable[Path],
        mode: str = "none",
        backends: dict[str, Backend] | None = None,
        backend_config: dict[str, dict[str, str]] | None = None,
        strict_readiness: bool = True,
        auto_complete: bool = True,
        response_cache: ResponseCache | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        self.repositories = [Path(r) for r in repositories]
        #: the server's response cache (``--cache-config``), None without one
        self.response_cache = response_cache
        #: the server's rate limiter (``--rate-limit``), None: off
        self.rate_limiter = rate_limiter if rate_limiter and rate_limiter.enabled else None
        self.mode = mode
        self.backends = backends or {}
        self.backend_config = backend_config or {}
        self.strict_readiness = strict_readiness
        self.auto_complete = auto_complete
        #: ``--model-namespacing``: each repository is a namespace, so that a model name
        #: in several repositories loads from each (keyed ``<repository>::<name>``)
        self.namespacing = False
        #: every model by key: its name, or ``<repository>::<name>`` for a name that
        #: several repositories hold (namespacing only)
        self.models: dict[str, ModelEntry] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.live = True
        #: ensembles unloaded because a step went away: loaded again once it is back
        self._orphans: set[str] = set()
        #: ``--metrics-config summary_latencies=true``: the summaries' quantiles
        self.summary_quantiles: tuple[tuple[float, float], ...] | None = None
        #: the skipped ``summary_quantiles`` pairs, logged at each version's load
        self.quantile_problems: list[str] = []

    # ------------------------------------------------------------------ discovery

    def folders(self) -> list[tuple[str, Path]]:
        """(model name, folder) of every model folder, repository by repository."""
        out: list[tuple[str, Path]] = []
        for repo in self.repositories:
            try:
                entries = sorted(os.scandir(repo), key=lambda e: e.name)
            except OSError:
                continue
            out += [(e.name, Path(e.path)) for e in entries if _model_folder(e)]
        return out

    def scan(self) -> dict[str, list[Path]]:
        """Model key -> the directories holding it (more than one is an error).

        With namespacing a name that several repositories hold has one key for each,
        ``<repository>::<name>``."""
        found: dict[str, list[Path]] = {}
        for name, path in self.folders():
            found.setdefault(name, []).append(path)
        if self.namespacing:
            for name in [n for n, dirs in found.items() if len(dirs) > 1]:
                for path in found.pop(name):
                    found[f"{path.parent}{_SEP}{name}"] = [path]
        return found

    def model_name(self, key: str) -> str:
        """The name of the model of ``key`` (see :meth:`scan`)."""
        return key.rpartition(_SEP)[2] if self.namespacing else key

    def _keys_of(self, name: str, keys: Iterable[str]) -> list[str]:
        """The namespaced ones among ``keys`` of model ``name``."""
        if not self.namespacing or _SEP in name:
            return []
        return [k for k in keys if _SEP in k and k.rpartition(_SEP)[2] == name]

    def resolve(self, name: str) -> str:
        """The key of the model a request names: with namespacing, a name that several
        repositories serve is ambiguous (Triton's error)."""
        if name in self.models or not self.namespacing:
            return name
        keys = [
            k
            for k in self._keys_of(name, self.models)
            if self.models[k].versions or self.models[k].attempted
        ]
        if len(keys) > 1:
            raise CoreError(
                f"There are {len(keys)} identifiers of model '{name}' in global map, model "
                "namespace must be provided to resolve ambiguity."
            )
        return keys[0] if keys else name

    # ------------------------------------------------------------------ lookup

    def get(self, name: str, version: str = "") -> ModelVersion:
        """The version to serve (highest ready when ``version`` is empty); §5 errors."""
        entry = self.models.get(self.resolve(name))
        if entry is None or not (entry.versions or entry.attempted):
            # (Triton's namespaced lookup answers 400)
            code = Code.INVALID_ARG if self.namespacing else Code.NOT_FOUND
            raise CoreError(f"Request for unknown model: '{name}' is not found", code)
        # (with namespacing Triton names the model with its repository)
        name = entry.label or name
        if version:
            v = parse_version(version)
            mv = entry.versions.get(v)
            if mv is None and v not in entry.loading:  # (one loading is known, not ready)
                raise CoreError(
                    f"Request for unknown model: '{name}' version {v} is not found",
                    Code.NOT_FOUND,
                )
            if mv is None or not mv.ready:
                raise CoreError(
                    f"Request for unknown model: '{name}' version {v} is not at ready state",
                    Code.UNAVAILABLE,
                )
            return mv
        versions = entry.versions
        if len(versions) == 1:  # (the common case, without sorting)
            for mv in versions.values():
                if mv.ready:
                    return mv
        ready = entry.ready_versions()
        if not ready:
            raise CoreError(
                f"Request for unknown model: '{name}' has no available versions", Code.NOT_FOUND
            )
        return ready[-1]

    def is_ready(self, name: str, version: str = "") -> bool:
        try:
            self.get(name, version)
        except CoreError:
            return False
        return True

    def server_ready(self) -> bool:
        if not self.live:
            return False
        if not self.strict_readiness:
            return True
        # (as Triton: a version loading or unloading makes the server not ready meanwhile)
        return not any(e.failed or e.settling() for e in self.models.values())

    def index(self, ready_only: bool = False) -> list[dict[str, str]]:
        # Triton lists the model directories of the repositories (with their states):
        # a model loaded from files sent with the load request is not in the index.
        found = self.scan()
        out: list[dict[str, str]] = []
        for key in self._index_order(found):
            name = self.model_name(key)
            if len(found[key]) > 1:
                # (Triton lists it so whether or not only ready models are asked for)
                out.append({"name": name, "state": "UNAVAILABLE", "reason": _TWO_FOLDERS})
                continue
            entry = self.models.get(key)
            states = entry.states() if entry is not None else []
            if entry is None or not states:
                if not ready_only and (entry is None or not entry.attempted):
                    out.append({"name": name})
                continue
            for v, state, reason in states:
                if ready_only and state != "READY":
                    continue
                item = {"name": name, "version": str(v), "state": state}
                if reason:
                    item["reason"] = reason
                out.append(item)
        return out

    def _index_order(self, found: dict[str, list[Path]]) -> list[str]:
        """The keys of ``found`` as the index lists them: by name, or with namespacing
        repository by repository (each by name)."""
        if not self.namespacing:
            return sorted(found)
        keys = [n if n in found else f"{p.parent}{_SEP}{n}" for n, p in self.folders()]
        return list(dict.fromkeys(keys))

    def loaded_versions(self) -> list[ModelVersion]:
        return [
            mv
            for _, e in sorted(self.models.items())
            for _, mv in sorted(e.versions.items())
            if mv.ready
        ]

    def metadata_json(self, name: str, version: str = "") -> bytes:
        mv = self.get(name, version)
        entry = self.models[self.resolve(name)]
        versions = (
            [str(mv.version)] if version else [str(v.version) for v in entry.ready_versions()]
        )
        cfg = mv.config
        assert cfg is not None
        batch = [-1] if cfg.max_batch_size > 0 else []
        platform = cfg.platform or cfg.backend

        def tensors(items: Iterable[Any]) -> list[dict[str, Any]]:
            return [
                {
                    "name": t.name,
                    "datatype": wire_datatype(t.data_type),
                    "shape": batch + list(t.dims),
                }
                for t in items
            ]

        return _json.dumps(
            {
                "name": name,
                "versions": versions,
                "platform": platform,
                "inputs": tensors(cfg.input),
                "outputs": tensors(cfg.output),
            }
        )

    # ------------------------------------------------------------------ loading

    async def load_startup(self, names: list[str] | None = None) -> list[str]:
        """Load every model (none/poll) or the named ones (explicit; ``*`` = all).

        Returns the names that failed.
        """
        found = self.scan()
        if self.mode != "explicit" or (names and "*" in names):
            wanted = sorted(found)
        else:
            wanted = sorted({k for n in names or [] for k in self._keys_of(n, found) or [n]})
        # ensembles after the models their steps use (ensembles of ensembles later still)
        results: list[Any] = []
        ordered: list[str] = []
        for level in _load_order(wanted, found):
            results += await asyncio.gather(
                *(self._load_named(n, found) for n in level), return_exceptions=True
            )
            ordered += level
        wanted = ordered
        failed = []
        for name, res in zip(wanted, results, strict=False):
            if isinstance(res, BaseException):
                failed.append(name)
                _log_failure(name, res)
                if isinstance(res, _NoSingleFolder):
                    continue  # (in Triton, a name with no model to fail leaves readiness be)
                entry = self.models.setdefault(name, ModelEntry(name))
                entry.failed = entry.last_failed = True
        return failed

    async def _load_named(self, name: str, found: dict[str, list[Path]]) -> None:
        await self.load_dir(name, _model_dir(name, found), None)

    async def load(
        self, name: str, config: str | None = None, files: dict[str, str] | None = None
    ) -> None:
        """The load API: raises CoreError with the texts Triton answers.

        With namespacing, a name that several repositories hold loads from each."""
        keys = self._keys_of(name, self.scan()) if not files else []
        if keys:
            for key in keys:
                await self.load(key, config)
            return
        poll_error = CoreError(
            f"failed to load '{name}', failed to poll from model repository", Code.INTERNAL
        )
        temp_dir: Path | None = None
        try:
            override = parse_override(config) if config is not None else None
            if files:
                if override is None:
                    raise PollError("file overrides need a 'config' parameter")
                temp_dir = _write_override_files(name, files)
                model_dir = temp_dir
            else:
                model_dir = _model_dir(name, self.scan())
                entry = self.models.get(name)
                if (
                    override is None
                    and entry is not None
                    and not entry.last_failed
                    and any(v.ready for v in entry.versions.values())
                    and entry.model_dir == model_dir
                    and entry.signature == _dir_signature(model_dir)
                ):
                    # unchanged on disk: Triton keeps what is loaded (even overrides, and
                    # versions an override's version policy left unloaded)
                    return
            await self.load_dir(name, model_dir, override, temp_dir)
            if self._orphans:
                await self._adopt_orphans()
        except PollError as e:
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            log.error("Poll failed for model directory '%s': %s", name, e)
            raise poll_error from None
        except CoreError:
            if (
                temp_dir is not None
                and self.models.get(name, ModelEntry(name)).temp_dir != temp_dir
            ):
                shutil.rmtree(temp_dir, ignore_errors=True)
            raise

    async def load_dir(
        self,
        name: str,
        model_dir: Path,
        override: ModelConfig | None,
        temp_dir: Path | None = None,
    ) -> None:
        key, name = name, self.model_name(name)
        entry = self.models.setdefault(key, ModelEntry(key))
        if self.namespacing and model_dir.parent in self.repositories:
            entry.namespace = model_dir.parent
            entry.label = f"{model_dir.parent}{_SEP}{name}"
        async with entry.lock:
            # (taken before the model runs: a model that writes into its directory, as
            # Python does its __pycache__, counts as changed at the next load, as in Triton)
            signature = _dir_signature(model_dir)
            cfg = override if override is not None else read_config(model_dir)
            if cfg is None:
                if not self.auto_complete:
                    raise PollError(
                        f"failed to open text file for read {model_dir / 'config.pbtxt'}: "
                        "No such file or directory"
                    )
                cfg = ModelConfig()
            validate_poll(cfg, name)
            if cfg.platform == "ensemble":
                validate_graph(cfg)
            available = _version_numbers(model_dir)
            normalize(cfg, name, first_subfolder(model_dir))
            if not cfg.backend and not cfg.platform:  # (as Triton: a poll failure)
                raise PollError(f"must specify 'platform' or 'backend' for '{name}'")
            if not self.auto_complete and cfg.platform != "ensemble":
                problem = io_problem(cfg)  # (else checked on what the model completes)
                if problem:
                    raise PollError(problem)
            versions = version_policy_versions(cfg, available)
            if cfg.platform == "ensemble":
                await self._ensemble_steps(key, cfg)
            entry.attempted = True
            if not versions:
                # the server stays ready when the model has versions, serving or unloaded
                # (a model failed before stays failed): only one never loaded makes it not ready
                entry.failed = entry.failed or not entry.versions
                entry.last_failed = entry.last_failed or not entry.versions
                raise CoreError(
                    f"load failed for model '{name}': at least one version must be available "
                    f"under the version policy of model '{name}'\n"
                )
            kept = await self._versions_kept(entry, cfg, versions, (model_dir, signature))
            fresh = await self._load_versions(
                entry, [v for v in versions if v not in kept], model_dir, cfg
            )
            _log_outcome(entry.label or name, fresh)
            loaded = sorted([*kept.values(), *fresh], key=lambda mv: mv.version)
            failures = [mv for mv in loaded if not mv.ready]
            if not failures:  # (a failed load leaves the configuration that serves)
                entry.base_config = cfg
            old = dict(entry.versions)
            new_versions: dict[int, ModelVersion] = {}
            for mv in loaded:
                prev = old.get(mv.version)
                if not mv.ready and prev is not None and prev.ready:
                    new_versions[mv.version] = prev  # a failed reload keeps the old one serving
                else:
                    new_versions[mv.version] = mv
            for v, mv in old.items():
                if v not in new_versions and (failures or not mv.ready):
                    new_versions[v] = mv  # (a failed load retires no version it leaves out)
            retired = [mv for v, mv in old.items() if new_versions.get(v) is not mv and mv.ready]
            if failures:  # (as Triton: a failed load unloads the versions it brought up)
                retired += [mv for v, mv in new_versions.items() if _brought_up(mv, old.get(v))]
            entry.versions = dict(sorted(new_versions.items()))
            for mv in retired:
                if mv.version not in entry.versions:
                    entry.versions[mv.version] = mv
                self._retire(mv)
            entry.versions = dict(sorted(entry.versions.items()))
            if temp_dir is not None:
                if entry.temp_dir is not None and entry.temp_dir != temp_dir:
                    shutil.rmtree(entry.temp_dir, ignore_errors=True)
                entry.temp_dir = temp_dir
            entry.signature = signature
            entry.model_dir = model_dir
            # (the server stays ready when a failed reload left the old version serving; a
            # version that failed before and that this load left alone stays failed)
            entry.last_failed = any(entry.versions.get(mv.version) is mv for mv in failures)
            entry.failed = any(_failed(mv) for mv in entry.versions.values())
            if failures:
                raise _load_failed(name, failures, "UNAVAILABLE")
            if cfg.platform != "ensemble":
                self._recheck_ensembles(key)

    async def _load_versions(
        self, entry: ModelEntry, versions: list[int], model_dir: Path, cfg: ModelConfig
    ) -> list[ModelVersion]:
        """Load ``versions`` afresh, together; they are listed LOADING meanwhile."""
        for v in versions:
            log.info("loading: %s:%d", entry.label or entry.name, v)
        entry.loading = set(versions)
        try:
            return list(
                await asyncio.gather(
                    *(self._load_version(entry.name, v, model_dir, cfg) for v in versions)
                )
            )
        finally:
            entry.loading = set()

    async def _versions_kept(
        self,
        entry: ModelEntry,
        cfg: ModelConfig,
        versions: list[int],
        folder: tuple[Path, tuple[Any, ...]],
    ) -> dict[int, ModelVersion]:
        """The serving versions a load keeps rather than loads afresh.

        As Triton: when no file of the model's folder changed but its configuration
        (``folder``: the folder and its signature, taken as this load began), and the
        configuration changed in its version policy and instance groups at most, the
        versions that stay keep serving (with their statistics and state) and their
        instances are updated in place; the others load or unload.
        """
        old_cfg = entry.base_config
        model_dir, signature = folder
        if (
            old_cfg is None
            or entry.temp_dir is not None  # (nor is this load's folder one: then it is new)
            or entry.model_dir != model_dir
            or _model_files(entry.signature, model_dir) != _model_files(signature, model_dir)
            or not _same_but(old_cfg, cfg, "version_policy", "instance_group")
        ):
            return {}
        serving = {v: mv for v, mv in entry.versions.items() if mv.ready and v in versions}
        if cfg.platform != "ensemble":
            await self._update_instances(entry.name, list(serving.values()), cfg, model_dir)
        return serving

    async def _load_version(
        self, key: str, version: int, model_dir: Path, base: ModelConfig
    ) -> ModelVersion:
        name = self.model_name(key)
        mv = ModelVersion(name, version)
        self._with_summaries(mv)
        cfg = ModelConfig()
        cfg.CopyFrom(base)
        ctx = LoadContext(name, version, model_dir, self.backend_config.get(cfg.backend, {}))
        instances: list[ModelInstance] = []
        try:
            if cfg.platform == "ensemble":
                return self._ensemble_version(key, version, cfg)
            backend = self.backends.get(cfg.backend)
            if backend is None:  # (Triton looks for the backend before checking the rest)
                raise CoreError(
                    f"unable to find backend library for backend '{cfg.backend}', try "
                    "specifying runtime on the model configuration.",
                    Code.INVALID_ARG,
                )
            runtime_check(cfg.runtime, ctx, backend)
            validate_load(cfg, completed=False)
            if self.auto_complete:
                cfg = await backend.auto_complete(ctx, cfg)
                normalize(cfg, name, [ctx.version_dir])
                normalize_instance_groups(cfg)
                validate_load(cfg)
            for out in cfg.output:
                if out.label_filename:
                    path = model_dir / out.label_filename
                    try:
                        # (lines as Triton's getline reads them: any bytes, cut at \n only)
                        mv.labels[out.name] = path.read_bytes().split(b"\n")
                    except OSError:
                        raise CoreError(
                            f"failed to open text file for read {path}: No such file or directory"
                        ) from None
            config_json = config_to_json(cfg)
            await _start_instances(backend, ctx, cfg, config_json.decode("utf-8"), [], instances)
            mv.config_json = config_json
            mv.activate(cfg, instances, self.response_cache, model_dir, self.rate_limiter)
            await warm_up(mv, cfg, model_dir)
        except CoreError as e:
            for inst in instances:
                await inst.finalize()
            mv.state = "UNAVAILABLE"
            mv.reason = f"{e.code.label}: {e.message}"
        return mv

    async def _update_instances(
        self, name: str, versions: list[ModelVersion], base: ModelConfig, model_dir: Path
    ) -> None:
        """Triton's in-place instance update of each serving version: instances whose
        group still asks for them keep serving, new ones are created (and warmed up),
        the others leave once they are free. A version whose update fails keeps serving
        as it was, its failure as its reason; the load then fails."""
        failed: list[ModelVersion] = []
        for mv in versions:
            try:
                await self._update_version(mv, base, model_dir)
            except CoreError as e:
                mv.reason = f"{e.code.label}: {e.message}"
                log.error("failed to load '%s' version %d: %s", name, mv.version, mv.reason)
                failed.append(mv)
        if failed:
            log.info("failed to load '%s'", name)
            raise _load_failed(name, failed, "READY")

    async def _update_version(self, mv: ModelVersion, base: ModelConfig, model_dir: Path) -> None:
        assert mv.config is not None
        cfg = ModelConfig()
        cfg.CopyFrom(mv.config)
        cfg.ClearField("instance_group")
        cfg.instance_group.extend(base.instance_group)
        normalize_instance_groups(cfg)
        validate_load(cfg)
        backend = self.backends[cfg.backend]
        ctx = LoadContext(mv.name, mv.version, model_dir, self.backend_config.get(cfg.backend, {}))
        config_json = config_to_json(cfg)
        spare = list(zip(_groups_of(mv.config), mv.instances, strict=True))
        created: list[ModelInstance] = []
        try:
            text = config_json.decode("utf-8")
            instances = await _start_instances(backend, ctx, cfg, text, spare, created)
            await warm_up(mv, cfg, model_dir, created)
        except CoreError:
            for inst in created:
                await inst.finalize()
            raise
        mv.config_json = config_json
        freed = mv.update_instances(cfg, instances)
        task = asyncio.get_running_loop().create_task(
            _finalize_when_free([inst for _, inst in spare], freed)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ ensembles

    def step_model(self, name: str, version: int) -> ModelVersion | None:
        """The ready version of an ensemble step's model (-1: the latest), or None."""
        try:
            return self.get(name, str(version) if version > 0 else "")
        except CoreError:
            return None

    def step_key(self, ensemble: str, step: str, found: Iterable[str] = ()) -> str:
        """The key of the model ``step`` of ensemble ``ensemble`` (a key): with namespacing
        the model of that name in the ensemble's own repository, when there is one (among
        the models known and the keys ``found``), else the one model of that name."""
        entry = self.models.get(ensemble)
        if entry is None or entry.namespace is None:
            return step
        own = f"{entry.namespace}{_SEP}{step}"
        return own if own in self.models or own in found else step

    def step_lookup(self, ensemble: str) -> Lookup:
        """``step_model`` for the steps of ensemble ``ensemble`` (a key)."""
        if not self.namespacing:
            return self.step_model

        def lookup(step: str, version: int) -> ModelVersion | None:
            return self.step_model(self.step_key(ensemble, step), version)

        return lookup

    async def _ensemble_steps(self, name: str, cfg: ModelConfig) -> None:
        """Load the step models an ensemble needs that are not loaded yet (as Triton does
        in explicit mode, and for an ensemble whose steps sort after it), then check the
        ensemble against them; an ensemble that fails the check stops serving."""
        self._orphans.discard(name)
        found = self.scan()
        closing = _closes_circle(name, cfg, found)
        if closing is not None:
            raise CoreError(
                f"load failed for model '{name}': circular dependency between ensembles: "
                f"{name} -> ... -> {closing} -> {name}\n",
                Code.INVALID_ARG,
            )
        failed: dict[str, str] = {}
        for step_name in step_models(cfg):
            step = self.step_key(name, step_name, found)
            entry = self.models.get(step)
            if step == name:
                continue
            if entry is not None and entry.lock.locked():
                dirs = found.get(step, [])
                if len(dirs) == 1 and not _is_ensemble(dirs[0]):
                    async with entry.lock:  # (being loaded for another ensemble: wait)
                        pass
                continue
            if entry is not None and entry.temp_dir is not None:
                continue  # (loaded from files sent with its load request: kept as it is)
            if self.mode == "explicit" or entry is None or not entry.attempted:
                try:
                    # (in explicit mode, as Triton, a name several repositories hold
                    # loads from each)
                    await self.load(step_name if self.mode == "explicit" else step)
                except CoreError as e:
                    if step in found:  # (a step with no folder: reported as not available)
                        failed[step_name] = e.message
        try:
            check_steps(cfg, self.step_lookup(name), failed)
        except CoreError as e:
            # as in Triton, the versions serving before go, and the ensembles using them
            self._drop_dependents(name)
            for mv in self.models[name].versions.values():
                if mv.ready:
                    self._retire(mv)
            raise CoreError(f"load failed for model '{name}': {e.message}\n") from None

    def _with_summaries(self, mv: ModelVersion) -> None:
        """Give a new version its latency summaries, when the server keeps them."""
        for problem in self.quantile_problems:
            log.error("%s", problem)
        if self.summary_quantiles is not None:
            mv.stats.summaries = LatencySummaries(self.summary_quantiles)

    def _ensemble_version(self, key: str, version: int, cfg: ModelConfig) -> ModelVersion:
        """A ready ensemble version (decoupled when one of its steps is)."""
        lookup = self.step_lookup(key)
        mv = EnsembleVersion(self.model_name(key), version, lookup)
        if self.namespacing:
            # (as Triton: each step names the namespace its model was found in, whatever
            # the file said)
            for step in cfg.ensemble_scheduling.step:
                found = self.models.get(self.step_key(key, step.model_name))
                if found is not None and found.namespace is not None:
                    step.model_namespace = str(found.namespace)
        self._with_summaries(mv)
        decoupled = cfg.model_transaction_policy.decoupled or any(
            m is not None and m.decoupled for m in (lookup(s, -1) for s in step_models(cfg))
        )
        cfg.model_transaction_policy.decoupled = decoupled
        mv.config_json = config_to_json(cfg)
        mv.activate_ensemble(cfg, decoupled, self.response_cache)
        return mv

    def _ensembles_using(self, step: str) -> list[tuple[str, EnsembleVersion]]:
        """The serving ensemble versions that have ``step`` as a step, with their names."""
        return [
            (other, mv)
            for other, entry in list(self.models.items())
            for mv in list(entry.versions.values())
            if mv.ready
            and isinstance(mv, EnsembleVersion)
            and step in {self.step_key(other, s) for s in mv.step_names}
        ]

    def _orphan(self, name: str, mv: EnsembleVersion) -> None:
        """Unload ensemble version ``mv`` until its steps serve (and fit) again, and the
        ensembles using it too."""
        self._retire(mv)
        self._orphans.add(name)
        self._drop_dependents(name)

    def _drop_dependents(self, name: str) -> None:
        """A model is unloading: the ensembles using it become unavailable, and load
        again once it is back."""
        for other, mv in self._ensembles_using(name):
            self._orphan(other, mv)

    def _recheck_ensembles(self, step: str) -> None:
        """``step`` loaded again: the serving ensembles using it that no longer fit it are
        unloaded, and, as in Triton, load again once their steps fit."""
        for other, mv in self._ensembles_using(step):
            assert mv.config is not None
            try:
                check_steps(mv.config, self.step_lookup(other))
            except CoreError as e:
                log.error("ensemble '%s' no longer fits '%s': %s", other, step, e.message)
                self._orphan(other, mv)

    async def _adopt_orphans(self) -> None:
        """Load again the ensembles whose steps are all back."""
        for name in sorted(self._orphans):
            entry = self.models.get(name)
            if entry is None or entry.lock.locked() or entry.base_config is None:
                continue
            if self._steps_fit(name, entry.base_config):
                self._orphans.discard(name)
                try:
                    await self.load(name)
                except CoreError as e:
                    log.error("failed to load '%s': %s", name, e.message)

    def _steps_fit(self, name: str, cfg: ModelConfig) -> bool:
        """Whether every step model of ensemble ``name`` (its ``cfg``) serves, as the
        ensemble needs."""
        lookup = self.step_lookup(name)
        if any(lookup(m, -1) is None for m in step_models(cfg)):
            return False
        try:
            check_steps(cfg, lookup)
        except CoreError:
            return False
        return True

    # ------------------------------------------------------------------ unloading

    def _retire(self, mv: ModelVersion) -> None:
        mv.state = "UNLOADING"
        mv.reason = ""
        task = asyncio.get_running_loop().create_task(self._finish_unload(mv))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish_unload(self, mv: ModelVersion) -> None:
        await mv.drain()
        mv.close()
        for inst in mv.instances:
            await inst.finalize()
        mv.instances = []
        mv.state = "UNAVAILABLE"
        mv.reason = _UNLOADED
        log.info("successfully unloaded '%s' version %d", mv.name, mv.version)
        entry = self.models.get(mv.name)
        if entry is not None and entry.versions.get(mv.version) is not mv:
            return

    async def unload(
        self, name: str, unload_dependents: bool = False, after_load: bool = True
    ) -> None:
        """Start unloading every version of ``name`` (unknown names are fine).

        As Triton: a load of the model in progress finishes first (``after_load``), then
        what it brought up unloads."""
        entry = self.models.get(name)
        if entry is None:
            for key in self._keys_of(name, list(self.models)):
                await self.unload(key, unload_dependents, after_load)
            return
        if after_load and entry.lock.locked():
            async with entry.lock:
                pass
        self._orphans.discard(name)
        self._drop_dependents(name)
        for mv in list(entry.versions.values()):
            if mv.ready:
                self._retire(mv)
        if entry.temp_dir is not None:
            temp = entry.temp_dir
            entry.temp_dir = None
            task = asyncio.get_running_loop().create_task(self._cleanup_later(entry, temp))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _cleanup_later(self, entry: ModelEntry, temp: Path) -> None:
        for mv in list(entry.versions.values()):
            await mv.drain()
        await asyncio.sleep(0)
        shutil.rmtree(temp, ignore_errors=True)

    async def shutdown(self) -> None:
        """Unload everything and wait for every finalize."""
        self.live = False
        for name in list(self.models):
            await self.unload(name, after_load=False)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # ------------------------------------------------------------------ poll mode

    async def poll_once(self) -> None:
        found = self.scan()
        for name in sorted(set(self.models) - set(found)):
            if any(v.ready for v in self.models[name].versions.values()):
                await self.unload(name)
        for name, dirs in sorted(found.items()):
            entry = self.models.get(name)
            if len(dirs) != 1:
                continue
            sig = _dir_signature(dirs[0])
            if entry is not None and entry.signature == sig:
                continue
            try:
                await self.load_dir(name, dirs[0], None)
            except (CoreError, PollError) as e:
                _log_failure(name, e)
                self.models.setdefault(name, ModelEntry(name)).signature = sig

    async def poll_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.poll_once()
            except Exception:  # keep polling whatever one round did
                log.exception("repository poll failed")


#: between a repository and a model name in a namespaced model's key
_SEP = "::"


def _model_folder(e: os.DirEntry[str]) -> bool:
    """Whether a repository's entry is a model folder."""
    return e.is_dir() and not e.name.startswith(".")


#: why a model name found in several repositories cannot load
_TWO_FOLDERS = "model appears in two or more repositories"


class _NoSingleFolder(PollError):
    """No repository, or more than one, has a folder of the model's name."""


def _model_dir(name: str, found: dict[str, list[Path]]) -> Path:
    """The one folder of model ``name`` among the repositories' (``found``: scan())."""
    dirs = found.get(name)
    if not dirs:
        raise _NoSingleFolder(f"failed to find model '{name}' in the model repositories")
    if len(dirs) > 1:
        raise _NoSingleFolder(_TWO_FOLDERS)
    return dirs[0]


#: the largest version number (Triton's versions are int64)
_MAX_VERSION = 2**63 - 1


def _version_numbers(model_dir: Path) -> list[int]:
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


class _LoggedError(CoreError):
    """A load failure whose reasons the load already logged, version by version."""


def _failed(mv: ModelVersion) -> bool:
    """Whether ``mv`` is a version whose load failed (not one unloaded or unloading)."""
    return mv.state == "UNAVAILABLE" and mv.reason != _UNLOADED


def _brought_up(mv: ModelVersion, before: ModelVersion | None) -> bool:
    """Whether a load made ``mv`` serve where nothing of its version served before (a
    version kept serving, or reloaded over one that served, was up already)."""
    return mv.ready and mv is not before and (before is None or not before.ready)


def _load_failed(name: str, versions: list[ModelVersion], state: str) -> _LoggedError:
    """Triton's answer to a load that failed for ``versions``, each now in ``state``
    (their reasons are logged already)."""
    text = "".join(f"version {mv.version} is at {state} state: {mv.reason};\n" for mv in versions)
    return _LoggedError(f"load failed for model '{name}': {text}")


def _log_outcome(name: str, loaded: list[ModelVersion]) -> None:
    """Log the end of a load as Triton does: each failed version, then the model."""
    failures = [mv for mv in loaded if not mv.ready]
    for mv in failures:
        log.error("failed to load '%s' version %d: %s", name, mv.version, mv.reason)
    if failures:
        log.info("failed to load '%s'", name)
    else:
        log.info("successfully loaded '%s'", name)


def _log_failure(name: str, error: BaseException) -> None:
    """Log a load that failed before its versions were loaded (or was logged already)."""
    if isinstance(error, _LoggedError):
        return
    if isinstance(error, PollError):
        log.error("Poll failed for model directory '%s': %s", name, error)
    else:
        log.error("failed to load '%s': %s", name, getattr(error, "message", error))


async def _start_instances(
    backend: Backend,
    ctx: LoadContext,
    cfg: ModelConfig,
    text: str,
    spare: list[tuple[ModelInstanceGroup, ModelInstance]],
    created: list[ModelInstance],
) -> list[ModelInstance]:
    """The instances of ``cfg``'s groups, in the order a load creates them: for each, a
    spare one of a group of the same kind (taken out of ``spare``), else a new one named
    ``<group>_<index>``, appended to ``created`` as it starts (the caller finalizes those
    should a later step fail). ``text``: ``cfg`` as JSON, for the backend."""
    instances: list[ModelInstance] = []
    for gi, group in enumerate(cfg.instance_group):
        for i in range(group.count):
            match = next((k for k, (g, _) in enumerate(spare) if _same_kind(g, group)), -1)
            if match >= 0:
                instances.append(spare.pop(match)[1])
                continue
            inst = await backend.create_instance(ctx, cfg, text, gi, i, f"{group.name}_{i}")
            created.append(inst)
            instances.append(inst)
    return instances


async def _finalize_when_free(
    instances: list[ModelInstance], freed: list[asyncio.Future[None]]
) -> None:
    """Finalize the instances an instance update left out, once each one is free."""
    await asyncio.gather(*freed)
    for inst in instances:
        await inst.finalize()


def _is_ensemble(model_dir: Path) -> bool:
    """Whether the config in ``model_dir`` is an ensemble's (False when it cannot say)."""
    try:
        cfg = read_config(model_dir)
    except PollError:
        return False
    return cfg is not None and cfg.platform == "ensemble"


def _ensemble_steps_in(model: str, found: dict[str, list[Path]]) -> list[str] | None:
    """The step models of ``model`` when its one folder holds an ensemble (None: not an
    ensemble, or a config that cannot be read)."""
    dirs = found.get(model, [])
    try:
        cfg = read_config(dirs[0]) if len(dirs) == 1 else None
    except PollError:
        cfg = None
    return step_models(cfg) if cfg is not None and cfg.platform == "ensemble" else None


def _closes_circle(name: str, cfg: ModelConfig, found: dict[str, list[Path]]) -> str | None:
    """The ensemble whose step leads back to ensemble ``name`` (``name`` itself when one
    of its own steps is ``name``), following ensembles of ensembles; None: no circle."""
    paths = [(step, name) for step in step_models(cfg)]
    seen: set[str] = set()
    while paths:
        model, user = paths.pop()
        if model == name:
            return user
        if model in seen:
            continue
        seen.add(model)
        paths += [(step, model) for step in _ensemble_steps_in(model, found) or []]
    return None


def _found_step(ensemble: str, step: str, found: dict[str, list[Path]]) -> str:
    """The key in ``found`` of the model ``step`` of ``ensemble``: with namespacing, the
    one in the ensemble's repository when the name is in several."""
    dirs = found.get(ensemble, [])
    own = f"{dirs[0].parent}{_SEP}{step}" if dirs else ""
    return own if own in found else step


def _load_order(names: list[str], found: dict[str, list[Path]]) -> list[list[str]]:
    """``names`` in groups to load one after the other: the models that are not
    ensembles, then the ensembles whose steps are all in earlier groups, and so on
    (ensembles that use each other in a circle come last, together)."""
    steps: dict[str, set[str]] = {}
    for name in names:
        used = _ensemble_steps_in(name, found)
        if used is not None:
            steps[name] = {_found_step(name, step, found) for step in used}
    levels = [[n for n in names if n not in steps]]
    left = [n for n in names if n in steps]
    while left:
        waiting = set(left)
        level = [n for n in left if not steps[n] & waiting] or left
        levels.append(level)
        left = [n for n in left if n not in level]
    return levels


def _same_but(a: Message, b: Message, *fields: str) -> bool:
    """Whether two messages of one type (configurations, instance groups) differ in
    ``fields`` at most."""
    a2, b2 = type(a)(), type(b)()
    a2.CopyFrom(a)
    b2.CopyFrom(b)
    for name in fields:
        a2.ClearField(name)
        b2.ClearField(name)
    return bool(a2 == b2)


def _model_files(signature: tuple[Any, ...], model_dir: Path) -> tuple[Any, ...]:
    """A folder signature without the model's configuration file (Triton tells a
    change of the configuration from one of the model's files)."""
    config = str(model_dir / "config.pbtxt")
    return tuple(item for item in signature if item[0] != config)


def _same_kind(a: ModelInstanceGroup, b: ModelInstanceGroup) -> bool:
    """Whether instances of group ``a`` can serve as instances of group ``b`` (Triton
    compares everything but the name and the count)."""
    return _same_but(a, b, "name", "count")


def _groups_of(cfg: ModelConfig) -> list[ModelInstanceGroup]:
    """The group of each instance, in the order a load creates them."""
    return [group for group in cfg.instance_group for _ in range(group.count)]


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


def _write_override_files(name: str, files: dict[str, str]) -> Path:
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
