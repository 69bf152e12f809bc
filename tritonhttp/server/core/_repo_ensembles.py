"""How the repository keeps its ensembles in step with their step models: which model a
step names (namespacing included), the order models load in (ensembles after their
steps), loading an ensemble's missing steps and checking it against them, and unloading
an ensemble whose step goes away or no longer fits, to load it again once its steps fit.

:class:`EnsembleDeps` is a part of the :class:`~._repository.Repository` by composition,
not a mixin: its one state of its own is the set of orphaned ensembles, and what else it
needs (the models, ``scan``, ``get``, ``load``, ``retire``) it reaches through the one
repository it is given, so it declares none of the repository's members itself.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ._config import ModelConfig, PollError, config_to_json, read_config
from ._ensemble import EnsembleVersion, Lookup, check_steps, step_models
from ._errors import Code, CoreError
from ._model import ModelVersion
from ._repo_files import SEP

if TYPE_CHECKING:
    from ._repository import Repository

__all__ = ["EnsembleDeps", "load_order"]

log = logging.getLogger("tritonhttp.server")


class EnsembleDeps:
    """The ensembles of a repository and the step models they depend on."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        #: ensembles unloaded because a step went away: loaded again once it is back
        self.orphans: set[str] = set()

    def step_model(self, name: str, version: int) -> ModelVersion | None:
        """The ready version of an ensemble step's model (-1: the latest), or None."""
        try:
            return self.repo.get(name, str(version) if version > 0 else "")
        except CoreError:
            return None

    def step_key(self, ensemble: str, step: str, found: Iterable[str] = ()) -> str:
        """The key of the model ``step`` of ensemble ``ensemble`` (a key): with namespacing
        the model of that name in the ensemble's own repository, when there is one (among
        the models known and the keys ``found``), else the one model of that name."""
        entry = self.repo.models.get(ensemble)
        if entry is None or entry.namespace is None:
            return step
        own = f"{entry.namespace}{SEP}{step}"
        return own if own in self.repo.models or own in found else step

    def step_lookup(self, ensemble: str) -> Lookup:
        """``step_model`` for the steps of ensemble ``ensemble`` (a key)."""
        if not self.repo.namespacing:
            return self.step_model

        def lookup(step: str, version: int) -> ModelVersion | None:
            return self.step_model(self.step_key(ensemble, step), version)

        return lookup

    async def load_steps(self, name: str, cfg: ModelConfig) -> None:
        """Load the step models an ensemble needs that are not loaded yet (as Triton does
        in explicit mode, and for an ensemble whose steps sort after it), then check the
        ensemble against them; an ensemble that fails the check stops serving."""
        repo = self.repo
        self.orphans.discard(name)
        found = repo.scan()
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
            entry = repo.models.get(step)
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
            if repo.mode == "explicit" or entry is None or not entry.attempted:
                try:
                    # (in explicit mode, as Triton, a name several repositories hold
                    # loads from each)
                    await repo.load(step_name if repo.mode == "explicit" else step)
                except CoreError as e:
                    if step in found:  # (a step with no folder: reported as not available)
                        failed[step_name] = e.message
        try:
            check_steps(cfg, self.step_lookup(name), failed)
        except CoreError as e:
            # as in Triton, the versions serving before go, and the ensembles using them
            self.drop_dependents(name)
            for mv in repo.models[name].versions.values():
                if mv.ready:
                    repo.retire(mv)
            raise CoreError(f"load failed for model '{name}': {e.message}\n") from None

    def version(self, key: str, version: int, cfg: ModelConfig) -> ModelVersion:
        """A ready ensemble version (decoupled when one of its steps is)."""
        repo = self.repo
        lookup = self.step_lookup(key)
        mv = EnsembleVersion(repo.model_name(key), version, lookup)
        if repo.namespacing:
            # (as Triton: each step names the namespace its model was found in, whatever
            # the file said)
            for step in cfg.ensemble_scheduling.step:
                found = repo.models.get(self.step_key(key, step.model_name))
                if found is not None and found.namespace is not None:
                    step.model_namespace = str(found.namespace)
        repo.with_summaries(mv)
        decoupled = cfg.model_transaction_policy.decoupled or any(
            m is not None and m.decoupled for m in (lookup(s, -1) for s in step_models(cfg))
        )
        cfg.model_transaction_policy.decoupled = decoupled
        mv.config_json = config_to_json(cfg)
        mv.activate_ensemble(cfg, decoupled, repo.response_cache)
        return mv

    def _using(self, step: str) -> list[tuple[str, EnsembleVersion]]:
        """The serving ensemble versions that have ``step`` as a step, with their names."""
        return [
            (other, mv)
            for other, entry in list(self.repo.models.items())
            for mv in list(entry.versions.values())
            if mv.ready
            and isinstance(mv, EnsembleVersion)
            and step in {self.step_key(other, s) for s in mv.step_names}
        ]

    def _orphan(self, name: str, mv: EnsembleVersion) -> None:
        """Unload ensemble version ``mv`` until its steps serve (and fit) again, and the
        ensembles using it too."""
        self.repo.retire(mv)
        self.orphans.add(name)
        self.drop_dependents(name)

    def drop_dependents(self, name: str) -> None:
        """A model is unloading: the ensembles using it become unavailable, and load
        again once it is back."""
        for other, mv in self._using(name):
            self._orphan(other, mv)

    def recheck(self, step: str) -> None:
        """``step`` loaded again: the serving ensembles using it that no longer fit it are
        unloaded, and, as in Triton, load again once their steps fit."""
        for other, mv in self._using(step):
            assert mv.config is not None
            try:
                check_steps(mv.config, self.step_lookup(other))
            except CoreError as e:
                log.error("ensemble '%s' no longer fits '%s': %s", other, step, e.message)
                self._orphan(other, mv)

    async def adopt_orphans(self) -> None:
        """Load again the ensembles whose steps are all back."""
        for name in sorted(self.orphans):
            entry = self.repo.models.get(name)
            if entry is None or entry.lock.locked() or entry.base_config is None:
                continue
            if self._steps_fit(name, entry.base_config):
                self.orphans.discard(name)
                try:
                    await self.repo.load(name)
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
    own = f"{dirs[0].parent}{SEP}{step}" if dirs else ""
    return own if own in found else step


def load_order(names: list[str], found: dict[str, list[Path]]) -> list[list[str]]:
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
