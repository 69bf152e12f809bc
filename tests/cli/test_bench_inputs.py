"""``bench`` input data without a server: perf_analyzer's JSON format (steps, streams,
flat lists, ``{"content", "shape"}``, ``{"b64"}``, ``validation_data``), raw-file
directories, zero and random data, ``--shape``, ``--string-length``/``--string-data``
and ``-b``. A file perf_analyzer accepts loads unchanged; one it rejects fails with an
``InputError`` (exit 2) that names the problem."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click import BadParameter
from tritonhttp_cli._bench_inputs import InputOptions, load_data, parse_shape_option
from tritonhttp_cli._errors import InputError
from tritonhttp_cli._values import ModelIO, TensorSpec


def model(
    inputs: dict[str, tuple[str, list[int]]],
    outputs: dict[str, tuple[str, list[int]]] | None = None,
    max_batch_size: int = 0,
) -> ModelIO:
    def specs(items: dict[str, tuple[str, list[int]]]) -> dict[str, TensorSpec]:
        return {n: TensorSpec(n, t, d) for n, (t, d) in items.items()}

    return ModelIO("m", "1", specs(inputs), specs(outputs or {}), max_batch_size)


#: Two INT32 [4, 4] inputs and outputs, as in perf_analyzer's examples.
PAIR = model(
    {"INPUT0": ("INT32", [4, 4]), "INPUT1": ("INT32", [4, 4])},
    {"OUTPUT0": ("INT32", [4, 4]), "OUTPUT1": ("INT32", [4, 4])},
)


def write(tmp_path: Path, document: Any, name: str = "data.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def load(io: ModelIO, *sources: str, **options: Any) -> Any:
    return load_data(io, InputOptions(sources=sources, **options))


def rejected(io: ModelIO, tmp_path: Path, document: Any, **options: Any) -> str:
    with pytest.raises(InputError) as caught:
        load(io, write(tmp_path, document), **options)
    assert caught.value.exit_code == 2
    return caught.value.format_message()


def test_flat_lists_round_robin_steps(tmp_path: Path) -> None:
    ones, twos = [1] * 16, [2] * 16
    data = load(
        PAIR,
        write(
            tmp_path, {"data": [{"INPUT0": ones, "INPUT1": ones}, {"INPUT0": twos, "INPUT1": twos}]}
        ),
    )
    assert not data.from_streams and len(data.streams) == 1
    first, second = data.streams[0]
    assert first.arrays["INPUT0"].shape == (4, 4) and first.arrays["INPUT0"].dtype == np.int32
    assert int(second.arrays["INPUT1"].sum()) == 32 and first.expected == {}


def test_b64_values_are_little_endian_bytes(tmp_path: Path) -> None:
    values = np.arange(16, dtype="<i4")
    encoded = base64.b64encode(values.tobytes()).decode()
    data = load(
        PAIR, write(tmp_path, {"data": [{"INPUT0": {"b64": encoded}, "INPUT1": {"b64": encoded}}]})
    )
    assert data.steps[0].arrays["INPUT0"].reshape(-1).tolist() == list(range(16))


def test_streams_for_sequences_of_strings(tmp_path: Path) -> None:
    io = model({"INPUT": ("BYTES", [1])})
    document = {
        "data": [
            [{"INPUT": ["1"]}, {"INPUT": ["2"]}, {"INPUT": ["3"]}],
            [{"INPUT": ["1"]}, {"INPUT": ["1"]}],
        ]
    }
    data = load(io, write(tmp_path, document))
    assert data.from_streams and [len(s) for s in data.streams] == [3, 2]
    assert data.streams[0][2].arrays["INPUT"].tolist() == [b"3"]


def test_content_and_shape_for_variable_dims(tmp_path: Path) -> None:
    io = model({"INPUT": ("INT32", [-1, -1])})
    content = [1] * 16
    document = {
        "data": [
            {"INPUT": {"content": content, "shape": [2, 8]}},
            {"INPUT": {"content": content, "shape": [8, 2]}},
            {"INPUT": {"content": content}},
        ]
    }
    # The third step has no shape: --shape gives it, as with perf_analyzer.
    data = load(io, write(tmp_path, document), shapes={"INPUT": [4, 4]})
    assert [s.arrays["INPUT"].shape for s in data.steps] == [(2, 8), (8, 2), (4, 4)]
    without = rejected(io, tmp_path, document)
    assert "step 2 'INPUT'" in without and "shape" in without


def test_b64_bytes_with_length_prefixes(tmp_path: Path) -> None:
    io = model({"INPUT": ("BYTES", [-1])})
    raw = b"".join(struct.pack("<I", len(s)) + s for s in (b"ab", b"", b"xyz"))
    document = {
        "data": [{"INPUT": {"content": {"b64": base64.b64encode(raw).decode()}, "shape": [3]}}]
    }
    data = load(io, write(tmp_path, document))
    assert data.steps[0].arrays["INPUT"].tolist() == [b"ab", b"", b"xyz"]
    cut = base64.b64encode(raw[:-2]).decode()
    message = rejected(io, tmp_path, {"data": [{"INPUT": {"content": {"b64": cut}, "shape": [3]}}]})
    assert "runs past the end" in message


def test_validation_data_aligned_with_data(tmp_path: Path) -> None:
    ones = [1] * 16
    document = {
        "data": [{"INPUT0": ones, "INPUT1": ones}],
        "validation_data": [{"OUTPUT0": [0] * 16, "OUTPUT1": [2] * 16}],
    }
    data = load(PAIR, write(tmp_path, document))
    assert int(data.steps[0].expected["OUTPUT1"].sum()) == 32
    document["validation_data"] = []
    assert "as long as" in rejected(PAIR, tmp_path, document)


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"steps": []}, '"data" list'),
        ([1, 2], '"data" list'),
        ({"data": []}, "non-empty"),
        ({"data": {"INPUT0": [1]}}, "non-empty list"),
        ({"data": [[{"INPUT0": [1] * 16}], {"INPUT0": [1] * 16}]}, "mixes"),
        ({"data": [{"INPUT0": [1] * 16}]}, "no value for input 'INPUT1'"),
        ({"data": [{"INPUT0": [1] * 15, "INPUT1": [1] * 16}]}, "15 values"),
        ({"data": [{"INPUT0": [[1] * 4] * 4, "INPUT1": [1] * 16}]}, "flat row-major"),
        ({"data": [{"INPUT0": {"b64": "%%%"}, "INPUT1": [1] * 16}]}, "invalid base64"),
        ({"data": [{"INPUT0": {"b64": "AAAA"}, "INPUT1": [1] * 16}]}, "needs 64"),
        ({"data": [{"INPUT0": {"shape": [4, 4]}, "INPUT1": [1] * 16}]}, '"content"'),
        (
            {"data": [{"INPUT0": {"content": [1] * 16, "shape": "4,4"}, "INPUT1": [1] * 16}]},
            '"shape"',
        ),
        ({"data": [{"INPUT0": ["a"] * 16, "INPUT1": [1] * 16}]}, "not a INT32"),
        ({"data": [{"INPUT0": [1.5] * 16, "INPUT1": [1] * 16}]}, "not a INT32"),
        ({"data": ["x"]}, "must be an object"),
    ],
)
def test_files_perf_analyzer_rejects(tmp_path: Path, document: Any, words: str) -> None:
    message = rejected(PAIR, tmp_path, document)
    assert words in message and "data.json" in message


def test_not_json_and_missing_paths(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InputError, match="not valid JSON"):
        load(PAIR, str(tmp_path / "bad.json"))
    with pytest.raises(InputError, match="not zero, random, a directory or a file"):
        load(PAIR, str(tmp_path / "missing"))


def test_several_files_add_their_steps(tmp_path: Path) -> None:
    step = {"INPUT0": [1] * 16, "INPUT1": [1] * 16}
    first = write(tmp_path, {"data": [step]}, "a.json")
    second = write(tmp_path, {"data": [step, step]}, "b.json")
    assert len(load(PAIR, first, second).steps) == 3


def test_raw_file_directory(tmp_path: Path) -> None:
    io = model({"IN": ("FP32", [2, 2]), "TEXT": ("BYTES", [2])}, {"OUT": ("FP32", [2, 2])})
    (tmp_path / "IN").write_bytes(np.arange(4, dtype="<f4").tobytes())
    (tmp_path / "TEXT").write_text("hello\nworld\n")
    (tmp_path / "OUT").write_bytes((np.arange(4, dtype="<f4") * 2).tobytes())
    (step,) = load(io, str(tmp_path)).steps
    assert step.arrays["IN"].tolist() == [[0, 1], [2, 3]]
    assert step.arrays["TEXT"].tolist() == [b"hello", b"world"]
    assert step.expected["OUT"].tolist() == [[0, 2], [4, 6]]
    (tmp_path / "IN").write_bytes(b"\0" * 12)
    with pytest.raises(InputError, match="12 bytes, shape \\[2, 2\\] of FP32 needs 16"):
        load(io, str(tmp_path))
    (tmp_path / "IN").unlink()
    with pytest.raises(InputError, match="no file for input 'IN'"):
        load(io, str(tmp_path))


def test_zero_random_shapes_and_strings() -> None:
    io = ModelIO(
        "m",
        "1",
        {"A": TensorSpec("A", "FP32", [-1, 3]), "S": TensorSpec("S", "BYTES", [-1, -1])},
        {},
        8,
    )
    with pytest.raises(InputError, match="--shape S:D1"):
        load(io, "zero")
    (step,) = load(io, "zero", shapes={"S": [2]}, batch_size=4, string_length=5).steps
    assert step.arrays["A"].shape == (4, 3) and not step.arrays["A"].any()
    assert step.arrays["S"].shape == (4, 2) and all(len(x) == 5 for x in step.arrays["S"].flat)
    (fixed,) = load(io, "random", shapes={"S": [1]}, string_data="hi").steps
    assert fixed.arrays["S"].tolist() == [[b"hi"]] and fixed.arrays["A"].any()
    with pytest.raises(InputError, match="does not fit"):
        load(io, "zero", shapes={"S": [2], "A": [4]})


def test_batch_size_limits() -> None:
    io = model({"A": ("FP32", [3])})
    with pytest.raises(InputError, match="does not batch"):
        load(io, batch_size=2)
    batching = ModelIO("m", "1", {"A": TensorSpec("A", "FP32", [-1, 3])}, {}, 4)
    with pytest.raises(InputError, match="max_batch_size 4"):
        load(batching, batch_size=5)


def test_shape_option_forms() -> None:
    assert parse_shape_option(("IN:2,3", "TEXT=4", "ns:x:1")) == {
        "IN": [2, 3],
        "TEXT": [4],
        "ns:x": [1],
    }
    for bad in ("IN", "IN:a", "IN:-1", ":3"):
        with pytest.raises(BadParameter):
            parse_shape_option((bad,))


def test_optional_inputs_may_be_left_out(tmp_path: Path) -> None:
    """An input the configuration marks optional may be missing from a step (or from a
    raw directory); the others may not."""
    document = {"data": [{"INPUT0": [1] * 16}]}
    (step,) = load(PAIR, write(tmp_path, document), optional=frozenset({"INPUT1"})).steps
    assert list(step.arrays) == ["INPUT0"]
    assert "no value for input 'INPUT1'" in rejected(PAIR, tmp_path, document)
    directory = tmp_path / "raw"
    directory.mkdir()
    (directory / "INPUT0").write_bytes(np.ones(16, dtype="<i4").tobytes())
    (raw,) = load(PAIR, str(directory), optional=frozenset({"INPUT1"})).steps
    assert list(raw.arrays) == ["INPUT0"]
