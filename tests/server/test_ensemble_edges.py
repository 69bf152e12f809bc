"""Ensembles at their edges, on real Triton and on our server side by side
(``tests/repos/ensemble_edges``, ``--model-control-mode=explicit``): what a config may not
hold (refused while polling or when loading, with Triton's texts)."""

from __future__ import annotations

from typing import Any

import pytest

from .test_ensemble_differential import ARGS, Step, _play, _poll_failures

pytestmark = pytest.mark.real_triton

#: ensembles refused while polling (the log says why)
POLL_REFUSED = [
    "with_backend", "with_instances", "with_optimization", "with_warmup", "no_steps",
    "one_tensor_twice",
]  # fmt: skip
#: ensembles refused when loading (the load answer says why)
LOAD_REFUSED = [
    "version_zero", "unmapped_input", "decoupled_and_input", "output_type_first",
    "nobatch_step_shape",
]  # fmt: skip
LOADED = ["nobatch_ensemble", "nobatch_step", "input_as_output"]


def test_config_checks_as_triton(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    repo = model_repo("ensemble_edges")
    real = real_triton_factory(repo, *ARGS)
    ours = bundled_server_factory(repo, *ARGS)
    steps: list[Step] = [
        *[("POST", f"/v2/repository/models/{m}/load", "") for m in POLL_REFUSED],
        *[("POST", f"/v2/repository/models/{m}/load", "") for m in LOAD_REFUSED + LOADED],
        ("POST", "/v2/repository/index", ""),
        *[("GET", f"/v2/models/{m}", "") for m in LOADED],
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)
    logs = [_poll_failures(server.log()) for server in (real, ours)]
    assert {m: logs[1].get(m) for m in POLL_REFUSED} == {m: logs[0].get(m) for m in POLL_REFUSED}
    assert logs[0]["with_instances"] == (
        "instance group should not be specified for ensemble 'with_instances'"
    )
