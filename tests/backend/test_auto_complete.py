"""``auto_complete_config`` as Triton 2.51 takes it, on real Triton and on our server in
both isolation modes: what the completed configuration becomes (read as Triton's JSON
reader reads it, or ignored as a whole where that reader refuses it), and the load
errors of ``ModelConfig``'s setters and of a config json cannot write."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ._http import exchange, load
from .conftest import REPOS

REPO = REPOS / "backend_autocomplete"
ARGS = ("--model-control-mode=explicit",)
LOADED = [
    "enum_text", "bad_enum", "unknown_field", "float_batch", "policy_empty", "null_io",
    "mend_dims", "mend_type",
]  # fmt: skip
REFUSED = ["numpy_dims", "no_name", "no_name_bad_key", "not_a_dict", "preferred_too_big"]

#: a frame of pb_utils in real Triton's traceback (ours never shows pb_utils' frames)
_PB_UTILS_FRAME = re.compile(r"  \S*triton_python_backend_utils\.py\(\d+\): \w+\\n")


def _load(url: str, model: str) -> tuple[int, str]:
    status, text = load(url, model)
    return status, _PB_UTILS_FRAME.sub("", text)


@pytest.mark.real_triton
@pytest.mark.parametrize("model", LOADED)
def test_the_completed_config_matches_triton(real: Any, server: Any, model: str) -> None:
    answers = [_load(s.url, model) for s in (real, server)]
    assert answers[1] == answers[0] == (200, "")
    path = f"/v2/models/{model}/config"
    assert exchange(server.url, "GET", path).body == exchange(real.url, "GET", path).body


@pytest.mark.real_triton
@pytest.mark.parametrize("model", REFUSED)
def test_load_errors_match_triton(real: Any, server: Any, model: str) -> None:
    theirs = _load(real.url, model)
    assert theirs[0] == 400
    assert _load(server.url, model) == theirs


def test_what_the_completed_config_becomes(server: Any) -> None:
    def config(model: str) -> dict[str, Any]:
        assert _load(server.url, model) == (200, "")
        return exchange(server.url, "GET", f"/v2/models/{model}/config").json()  # type: ignore[no-any-return]

    doc = config("enum_text")
    assert doc["max_batch_size"] == 4
    assert (doc["input"][0]["data_type"], doc["input"][0]["optional"]) == ("TYPE_FP32", True)
    assert doc["output"][0]["data_type"] == "TYPE_INT32"
    assert config("bad_enum")["max_batch_size"] == 0  # ignored as a whole
    assert config("unknown_field")["max_batch_size"] == 0
    assert config("policy_empty")["model_transaction_policy"] == {"decoupled": False}
    doc = config("null_io")
    assert doc["input"] == [] and "dynamic_batching" not in doc
