"""Reading a JSON config override (``core/_override.py``): what no server is needed for.
The rules themselves are checked against real Triton in ``test_differential_lifecycle.py``
(``test_config_override_read_as_triton_reads_it``)."""

from __future__ import annotations

import pytest

from tritonhttp.server.core._override import OverrideError, read_override


@pytest.mark.parametrize(
    "text",
    ["", "{", "[]", "1", '"x"', "null", '{"input":' + "[" * 100_000 + "]" * 100_000 + "}"],
    ids=["empty", "syntax", "list", "number", "string", "null", "deep"],
)
def test_what_is_not_a_configuration_is_an_override_error(text: str) -> None:
    with pytest.raises(OverrideError):
        read_override(text)


def test_camel_case_names_are_the_same_fields() -> None:
    config = read_override(
        '{"max_batch_size": 2, "maxBatchSize": 8, "instanceGroup": {"count": 3}}'
    )
    assert config.max_batch_size == 8
    assert [g.count for g in config.instance_group] == [3]


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(OverrideError, match="bogus"):
        read_override('{"bogus": [[1]]}')


def test_flattening_keeps_the_order() -> None:
    config = read_override('{"input": [{"name": "a"}, [[{"name": "b"}], null], {"name": "c"}]}')
    assert [i.name for i in config.input] == ["a", "b", "c"]
