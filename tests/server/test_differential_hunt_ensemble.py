"""Ensembles whose Python steps bend their outputs, on real Triton and on our server side
by side (``tests/repos/hunt_ensemble``, ``--model-control-mode=explicit``): ``shaper``
answers its input as the request parameter ``mode`` says (another data type or shape, no
output, an extra output, an empty tensor, an error), and the ensembles pass that on to
``sink`` or out as their own outputs. Also the load error of an ensemble whose step model
is in the repository but fails to load."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import text_format

from tritonhttp.server.core._ensemble import check_steps
from tritonhttp.server.core._errors import CoreError
from tritonhttp.server.core.model_config_pb2 import ModelConfig

from ._wire import infer_body
from .test_ensemble_differential import ARGS, Step, _play

IN4 = ("IN", "FP32", [4], [1, 2, 3, 4])


def _infer(model: str, *tensors: Any, **extra: Any) -> Step:
    return ("POST", f"/v2/models/{model}/infer", infer_body(*tensors, **extra))


@pytest.mark.real_triton
def test_step_outputs_bent_by_the_step(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """An ensemble response repeats the sequence parameters once per output a step made
    with any data in it: an empty output brings none (and a response of empty outputs
    has no ``parameters`` at all). Steps answering another data type or shape than the
    next step's config, no output, an extra output or an error answer as on Triton."""
    repo = model_repo("hunt_ensemble")
    args = (*ARGS, "--load-model=e_dyn", "--load-model=e_mix")
    real = real_triton_factory(repo, *args)
    ours = bundled_server_factory(repo, *args)
    empty = {"mode": "empty"}
    steps: list[Step] = [
        _infer("e_mix", IN4, parameters=empty),
        _infer("e_mix", IN4, parameters=empty, outputs=[{"name": "MID"}]),
        _infer("e_mix", IN4, parameters=empty, outputs=[{"name": "OUT"}]),
        _infer("e_mix", IN4, parameters={**empty, "binary_data_output": True}),
        _infer("e_mix", IN4, parameters={**empty, "sequence_id": 3, "sequence_start": True}),
        _infer("e_dyn", IN4, parameters=empty),
        _infer("e_dyn", ("IN", "FP32", [0], []), parameters={"sequence_id": 3}),
        *[
            _infer("e_dyn", IN4, parameters={"mode": mode})
            for mode in ("", "int", "long", "2d", "str", "missing", "extra", "raise", "error")
        ],
        _infer("e_dyn", IN4, parameters={"mode": "int"}, outputs=[{"name": "MID"}]),
        *[("GET", f"/v2/models/{m}/stats", "") for m in ("e_dyn", "e_mix", "shaper", "sink")],
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


@pytest.mark.real_triton
def test_a_step_that_fails_to_load_is_named_with_its_error(
    real_triton_factory: Any, bundled_server_factory: Any, model_repo: Any
) -> None:
    """Loading an ensemble loads its steps; one in the repository that fails to load (a
    bad config, a failing ``initialize``, an ensemble with no version) makes the load
    answer quote that step's own load error."""
    repo = model_repo("hunt_ensemble")
    real = real_triton_factory(repo, *ARGS)
    ours = bundled_server_factory(repo, *ARGS)
    steps: list[Step] = [
        ("POST", f"/v2/repository/models/{m}/load", "")
        for m in ("e_broken", "e_initfail", "e_nest_nover", "initfail", "e_initfail")
    ]
    problems = _play(real, ours, steps)
    assert not problems, "\n".join(problems)


def test_the_load_error_quotes_the_failed_step() -> None:
    """What ``check_steps`` makes of a step's failed load (the text of
    ``test_a_step_that_fails_to_load_is_named_with_its_error``); a step that was not tried
    is still one that is not available."""
    cfg = ModelConfig()
    text_format.Parse(
        'name: "e" platform: "ensemble" '
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ] '
        'output [ { name: "MID" data_type: TYPE_FP32 dims: [ -1 ] } ] '
        'ensemble_scheduling { step [ { model_name: "s" model_version: -1 '
        'input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "MID" } } ] }',
        cfg,
    )
    failed = {"s": "load failed for model 's': version 1 is at UNAVAILABLE state: no;\n"}
    messages = []
    for given in (failed, {}):
        with pytest.raises(CoreError) as caught:
            check_steps(cfg, lambda model, version: None, given)
        messages.append(caught.value.message)
    assert messages == [
        "ensemble 'e' depends on 's' which has no loaded version. Model 's' loading failed "
        "with error: version 1 is at UNAVAILABLE state: no;",
        "ensemble e contains models that are not available or ambiguous: s",
    ]
