"""A loaded version's instances as the repository creates them: started group by group
for a load, and, in Triton's in-place instance update, kept where a group of the same
kind still asks for them (the others finalized once they are free). Also the comparison
of configurations that tells a load whether such an update is enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._backend_api import Backend, LoadContext, ModelInstance
from ._config import ModelConfig, config_to_json, normalize_instance_groups, validate_load
from ._errors import CoreError
from ._model import ModelVersion
from ._warmup import warm_up
from .model_config_pb2 import ModelInstanceGroup

if TYPE_CHECKING:
    from google.protobuf.message import Message

__all__ = ["same_but", "start_instances", "update_version"]


def same_but(a: Message, b: Message, *fields: str) -> bool:
    """Whether two messages of one type (configurations, instance groups) differ in
    ``fields`` at most."""
    a2, b2 = type(a)(), type(b)()
    a2.CopyFrom(a)
    b2.CopyFrom(b)
    for name in fields:
        a2.ClearField(name)
        b2.ClearField(name)
    return bool(a2 == b2)


def _same_kind(a: ModelInstanceGroup, b: ModelInstanceGroup) -> bool:
    """Whether instances of group ``a`` can serve as instances of group ``b`` (Triton
    compares everything but the name and the count)."""
    return same_but(a, b, "name", "count")


def _groups_of(cfg: ModelConfig) -> list[ModelInstanceGroup]:
    """The group of each instance, in the order a load creates them."""
    return [group for group in cfg.instance_group for _ in range(group.count)]


async def start_instances(
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


async def update_version(
    mv: ModelVersion,
    base: ModelConfig,
    model_dir: Path,
    backends: dict[str, Backend],
    backend_config: dict[str, dict[str, str]],
) -> Coroutine[Any, Any, None]:
    """Update serving version ``mv`` in place to the instance groups of ``base``: its
    instances whose group still asks for them keep serving, new ones are created and
    warmed up (``backends``, ``backend_config``: the repository's). Returns what
    finalizes the instances left out once each one is free, for the caller to run as a
    task; a CoreError leaves ``mv`` as it was (the new instances finalized)."""
    assert mv.config is not None
    cfg = ModelConfig()
    cfg.CopyFrom(mv.config)
    cfg.ClearField("instance_group")
    cfg.instance_group.extend(base.instance_group)
    normalize_instance_groups(cfg)
    validate_load(cfg)
    backend = backends[cfg.backend]
    ctx = LoadContext(mv.name, mv.version, model_dir, backend_config.get(cfg.backend, {}))
    config_json = config_to_json(cfg)
    spare = list(zip(_groups_of(mv.config), mv.instances, strict=True))
    created: list[ModelInstance] = []
    try:
        text = config_json.decode("utf-8")
        instances = await start_instances(backend, ctx, cfg, text, spare, created)
        await warm_up(mv, cfg, model_dir, created)
    except CoreError:
        for inst in created:
            await inst.finalize()
        raise
    mv.config_json = config_json
    freed = mv.update_instances(cfg, instances)
    return _finalize_when_free([inst for _, inst in spare], freed)


async def _finalize_when_free(
    instances: list[ModelInstance], freed: list[asyncio.Future[None]]
) -> None:
    """Finalize the instances an instance update left out, once each one is free."""
    await asyncio.gather(*freed)
    for inst in instances:
        await inst.finalize()
