"""The model repository: discovery, versions, control modes, load and unload.

The parts it is made of: :mod:`._repo_files` (the repositories on disk),
:mod:`._repo_entry` (a model's entry and how a load's outcome is told),
:mod:`._repo_instances` (a version's instances) and :mod:`._repo_ensembles` (ensembles
and the step models they depend on).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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
from ._ensemble import validate_graph
from ._errors import Code, CoreError
from ._model import ModelVersion
from ._rate_limit import RateLimiter
from ._repo_ensembles import EnsembleDeps, load_order
from ._repo_entry import (
    UNLOADED,
    ModelEntry,
    brought_up,
    is_failed,
    load_failed,
    log_failure,
    log_outcome,
)
from ._repo_files import (
    SEP,
    TWO_FOLDERS,
    NoSingleFolder,
    dir_signature,
    is_model_folder,
    model_files,
    parse_version,
    single_folder,
    version_numbers,
    write_override_files,
)
from ._repo_instances import same_but, start_instances, update_version
from ._summary import LatencySummaries
from ._warmup import warm_up

__all__ = ["ModelEntry", "Repository"]

log = logging.getLogger("tritonhttp.server")


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
        #: the ensembles and the step models they depend on
        self.ensembles = EnsembleDeps(self)
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
            out += [(e.name, Path(e.path)) for e in entries if is_model_folder(e)]
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
                    found[f"{path.parent}{SEP}{name}"] = [path]
        return found

    def model_name(self, key: str) -> str:
        """The name of the model of ``key`` (see :meth:`scan`)."""
        return key.rpartition(SEP)[2] if self.namespacing else key

    def _keys_of(self, name: str, keys: Iterable[str]) -> list[str]:
        """The namespaced ones among ``keys`` of model ``name``."""
        if not self.namespacing or SEP in name:
            return []
        return [k for k in keys if SEP in k and k.rpartition(SEP)[2] == name]

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
                out.append({"name": name, "state": "UNAVAILABLE", "reason": TWO_FOLDERS})
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
        keys = [n if n in found else f"{p.parent}{SEP}{n}" for n, p in self.folders()]
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
        for level in load_order(wanted, found):
            results += await asyncio.gather(
                *(self._load_named(n, found) for n in level), return_exceptions=True
            )
            ordered += level
        wanted = ordered
        failed = []
        for name, res in zip(wanted, results, strict=False):
            if isinstance(res, BaseException):
                failed.append(name)
                log_failure(name, res)
                if isinstance(res, NoSingleFolder):
                    continue  # (in Triton, a name with no model to fail leaves readiness be)
                entry = self.models.setdefault(name, ModelEntry(name))
                entry.failed = entry.last_failed = True
        return failed

    async def _load_named(self, name: str, found: dict[str, list[Path]]) -> None:
        await self.load_dir(name, single_folder(name, found), None)

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
                temp_dir = write_override_files(name, files)
                model_dir = temp_dir
            else:
                model_dir = single_folder(name, self.scan())
                entry = self.models.get(name)
                if (
                    override is None
                    and entry is not None
                    and not entry.last_failed
                    and any(v.ready for v in entry.versions.values())
                    and entry.model_dir == model_dir
                    and entry.signature == dir_signature(model_dir)
                ):
                    # unchanged on disk: Triton keeps what is loaded (even overrides, and
                    # versions an override's version policy left unloaded)
                    return
            await self.load_dir(name, model_dir, override, temp_dir)
            if self.ensembles.orphans:
                await self.ensembles.adopt_orphans()
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
            entry.label = f"{model_dir.parent}{SEP}{name}"
        async with entry.lock:
            # (taken before the model runs: a model that writes into its directory, as
            # Python does its __pycache__, counts as changed at the next load, as in Triton)
            signature = dir_signature(model_dir)
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
            available = version_numbers(model_dir)
            normalize(cfg, name, first_subfolder(model_dir))
            if not cfg.backend and not cfg.platform:  # (as Triton: a poll failure)
                raise PollError(f"must specify 'platform' or 'backend' for '{name}'")
            if not self.auto_complete and cfg.platform != "ensemble":
                problem = io_problem(cfg)  # (else checked on what the model completes)
                if problem:
                    raise PollError(problem)
            versions = version_policy_versions(cfg, available)
            if cfg.platform == "ensemble":
                await self.ensembles.load_steps(key, cfg)
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
            log_outcome(entry.label or name, fresh)
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
                retired += [mv for v, mv in new_versions.items() if brought_up(mv, old.get(v))]
            entry.versions = dict(sorted(new_versions.items()))
            for mv in retired:
                if mv.version not in entry.versions:
                    entry.versions[mv.version] = mv
                self.retire(mv)
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
            entry.failed = any(is_failed(mv) for mv in entry.versions.values())
            if failures:
                raise load_failed(name, failures, "UNAVAILABLE")
            if cfg.platform != "ensemble":
                self.ensembles.recheck(key)

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
            or model_files(entry.signature, model_dir) != model_files(signature, model_dir)
            or not same_but(old_cfg, cfg, "version_policy", "instance_group")
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
        self.with_summaries(mv)
        cfg = ModelConfig()
        cfg.CopyFrom(base)
        ctx = LoadContext(name, version, model_dir, self.backend_config.get(cfg.backend, {}))
        instances: list[ModelInstance] = []
        try:
            if cfg.platform == "ensemble":
                return self.ensembles.version(key, version, cfg)
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
            await start_instances(backend, ctx, cfg, config_json.decode("utf-8"), [], instances)
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
            raise load_failed(name, failed, "READY")

    async def _update_version(self, mv: ModelVersion, base: ModelConfig, model_dir: Path) -> None:
        left_out = await update_version(mv, base, model_dir, self.backends, self.backend_config)
        task = asyncio.get_running_loop().create_task(left_out)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def with_summaries(self, mv: ModelVersion) -> None:
        """Give a new version its latency summaries, when the server keeps them."""
        for problem in self.quantile_problems:
            log.error("%s", problem)
        if self.summary_quantiles is not None:
            mv.stats.summaries = LatencySummaries(self.summary_quantiles)

    # ------------------------------------------------------------------ unloading

    def retire(self, mv: ModelVersion) -> None:
        """Start unloading ``mv`` (UNLOADING until no request is in flight, then finalized)."""
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
        mv.reason = UNLOADED
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
        self.ensembles.orphans.discard(name)
        self.ensembles.drop_dependents(name)
        for mv in list(entry.versions.values()):
            if mv.ready:
                self.retire(mv)
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
            sig = dir_signature(dirs[0])
            if entry is not None and entry.signature == sig:
                continue
            try:
                await self.load_dir(name, dirs[0], None)
            except (CoreError, PollError) as e:
                log_failure(name, e)
                self.models.setdefault(name, ModelEntry(name)).signature = sig

    async def poll_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.poll_once()
            except Exception:  # keep polling whatever one round did
                log.exception("repository poll failed")
