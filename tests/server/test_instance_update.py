"""A load that changes only a model's instance groups (and version policy) updates the
serving version in place, as real Triton does (the pinned ``instance-update-*`` cases and
``failed-reload-tried-again`` of ``test_differential_fuzz_endpoints.py`` compare it with
real Triton): the instances still asked for keep serving with their state, new ones
start, the others finish their work and are finalized; statistics go on. These tests run
on our server alone, in both isolation modes, with FIFO, dynamic and sequence batching.

The model logs each instance's ``initialize``, ``finalize`` and slow executions to a file
outside the repository, and answers ``[count, instance id]``: how many requests this
instance ran, and which instance it is.
"""

from __future__ import annotations

import compileall
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonhttp.server import _launch

from ._wire import json_call

MODEL = """import os
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        self.log = Path(args["model_repository"]).parent.parent / "events.txt"
        if self.name.endswith("_2") and "fail_third" in args["model_config"]:
            raise RuntimeError("no third instance")
        self.count = 0
        self.id = hash((os.getpid(), id(self))) % 2**31  # (workers fork from one parent)
        self.write("init")

    def write(self, what):
        with open(self.log, "a") as f:
            f.write(f"{what} {self.name}\\n")

    def execute(self, requests):
        answers = []
        for request in requests:
            self.count += 1
            delay = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().flat[0])
            if delay:
                time.sleep(delay / 1000)
                self.write("slow")
            out = np.array([self.count, self.id], dtype=np.int64)
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return answers

    def finalize(self):
        self.write("fini")
"""

BASE = {
    "backend": "python",
    "input": [{"name": "IN", "data_type": "TYPE_INT64", "dims": [1]}],
    "output": [{"name": "OUT", "data_type": "TYPE_INT64", "dims": [2]}],
}
DYNAMIC = {"dynamic_batching": {"max_queue_delay_microseconds": 100}}
SEQUENCE: dict[str, Any] = {"sequence_batching": {"max_sequence_idle_microseconds": 60_000_000}}
OLDEST: dict[str, Any] = {
    "sequence_batching": {
        "max_sequence_idle_microseconds": 60_000_000,
        "oldest": {"max_candidate_sequences": 1},
    }
}


def _pbtxt(scheduling: dict[str, Any]) -> str:
    text = """backend: "python"
input [{ name: "IN" data_type: TYPE_INT64 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_INT64 dims: [2] }]
instance_group [{ kind: KIND_CPU count: 1 }]
"""
    if scheduling == DYNAMIC:
        text += "dynamic_batching { max_queue_delay_microseconds: 100 }\n"
    elif scheduling == SEQUENCE:
        text += "sequence_batching { max_sequence_idle_microseconds: 60000000 }\n"
    elif scheduling == OLDEST:
        text += (
            "sequence_batching { max_sequence_idle_microseconds: 60000000 "
            "oldest { max_candidate_sequences: 1 } }\n"
        )
    return text


class Server:
    def __init__(self, url: str, root: Path, scheduling: dict[str, Any]) -> None:
        self.url = url
        self.events_file = root / "events.txt"
        self.scheduling = scheduling
        self._sequences = itertools.count(1)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return json_call(self.url, method, path, body)

    def load(self, groups: list[dict[str, Any]] | None = None, **more: Any) -> tuple[int, Any]:
        body: dict[str, Any] = {}
        if groups is not None or more:
            config = {**BASE, **self.scheduling, **more}
            if groups is not None:
                config["instance_group"] = groups
            body = {"parameters": {"config": json.dumps(config)}}
        return self.call("POST", "/v2/repository/models/m/load", body)

    def infer(
        self, delay_ms: int = 0, sequence: tuple[int, bool, bool] | None = None
    ) -> tuple[int, int]:
        """``[count, instance id]``; ``sequence``: (id, start, end), by default a sequence
        of its own for a sequence-batching model."""
        body: dict[str, Any] = {
            "inputs": [{"name": "IN", "datatype": "INT64", "shape": [1], "data": [delay_ms]}]
        }
        if sequence is None and "sequence_batching" in self.scheduling:
            sequence = (next(self._sequences), True, True)
        if sequence is not None:
            cid, start, end = sequence
            body["parameters"] = {
                "sequence_id": cid, "sequence_start": start, "sequence_end": end
            }  # fmt: skip
        status, answer = self.call("POST", "/v2/models/m/infer", body)
        assert status == 200, answer
        count, instance = answer["outputs"][0]["data"]
        return count, instance

    def inference_count(self) -> int:
        status, stats = self.call("GET", "/v2/models/m/stats")
        assert status == 200
        return int(stats["model_stats"][0]["inference_count"])

    def groups(self) -> list[tuple[str, str, int]]:
        status, config = self.call("GET", "/v2/models/m/config")
        assert status == 200
        return [(g["name"], g["kind"], g["count"]) for g in config["instance_group"]]

    def events(self, settle: float = 0.3) -> list[str]:
        """The events logged since the last call (finalizing may come a little later)."""
        time.sleep(settle)
        try:
            text = self.events_file.read_text()
        except FileNotFoundError:
            return []
        self.events_file.unlink()
        return text.splitlines()


def _start(tmp: Path, isolation: str, scheduling: dict[str, Any], compiled: bool) -> Any:
    repo = tmp / "repo"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(_pbtxt(scheduling))
    (repo / "m" / "1" / "model.py").write_text(MODEL)
    if compiled:  # (as a repository served before: loading writes nothing into it)
        compileall.compile_dir(repo, quiet=1)
    return _launch.running(
        repo, "--model-control-mode=explicit", "--load-model=m", f"--python-isolation={isolation}"
    )


@pytest.fixture(
    params=[
        ("process", {}),
        ("in-process", {}),
        ("process", DYNAMIC),
        ("in-process", DYNAMIC),
        ("process", SEQUENCE),
        ("in-process", SEQUENCE),
    ],
    ids=[
        "process",
        "in-process",
        "process-dynamic",
        "in-process-dynamic",
        "process-sequence",
        "in-process-sequence",
    ],
)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    isolation, scheduling = request.param
    with _start(tmp_path, isolation, scheduling, compiled=True) as s:
        server = Server(s.url, tmp_path, scheduling)
        assert server.events() == ["init m_0_0"]
        yield server


def test_more_instances_join_the_one_that_serves(server: Server) -> None:
    first = server.infer()
    assert first[0] == 1
    assert server.load([{"count": 3}]) == (200, None)
    assert sorted(server.events()) == ["init m_0_1", "init m_0_2"]
    if server.scheduling == SEQUENCE:  # (three sequences held open take one instance each)
        answers = [server.infer(sequence=(500 + i, True, False)) for i in range(3)]
    else:
        answers = [server.infer() for _ in range(6)]
    assert len({instance for _, instance in answers}) == 3
    # the first instance kept its state: it counts on from the request it ran before
    assert max(count for count, instance in answers if instance == first[1]) >= 2
    assert server.inference_count() == 1 + len(answers)
    assert server.groups() == [("m_0", "KIND_CPU", 3)]


def test_instances_left_out_finish_their_work_first(server: Server) -> None:
    assert server.load([{"count": 3}]) == (200, None)
    server.events()
    answers: list[tuple[int, int]] = []
    # (sequences held open take one instance each, and keep it until they end)
    sequences = [
        (500 + i, True, False) if server.scheduling == SEQUENCE else None for i in range(3)
    ]
    slow = [
        threading.Thread(target=lambda seq=seq: answers.append(server.infer(800, seq)))
        for seq in sequences
    ]
    for t in slow:
        t.start()
    time.sleep(0.3)  # (all three run, one on each instance)
    assert server.load([{"count": 1}]) == (200, None)
    for t in slow:
        t.join()
    assert len(answers) == 3
    for seq in sequences:
        if seq is not None:
            server.infer(sequence=(seq[0], False, True))
    events = server.events()
    assert sorted(events) == ["fini m_0_1", "fini m_0_2", "slow m_0_0", "slow m_0_1", "slow m_0_2"]
    for name in ("m_0_1", "m_0_2"):
        assert events.index(f"slow {name}") < events.index(f"fini {name}")
    kept = {server.infer()[1] for _ in range(3)}
    assert len(kept) == 1
    assert server.inference_count() == (9 if server.scheduling == SEQUENCE else 6)
    assert server.groups() == [("m_0", "KIND_CPU", 1)]


def test_renamed_or_regrouped_instances_stay(server: Server) -> None:
    assert server.load([{"count": 2}]) == (200, None)
    server.events()
    assert server.load([{"count": 2, "name": "g"}]) == (200, None)
    assert server.load([{"count": 1}, {"count": 1, "name": "h"}]) == (200, None)
    assert server.events() == []
    assert server.groups() == [("m_0", "KIND_CPU", 1), ("h", "KIND_CPU", 1)]


def test_another_kind_replaces_the_instances_statistics_go_on(server: Server) -> None:
    before = server.infer()
    assert server.load([{"kind": "KIND_MODEL"}]) == (200, None)
    assert sorted(server.events()) == ["fini m_0_0", "init m_0_0"]
    after = server.infer()
    assert after[0] == 1 and after[1] != before[1]
    assert server.inference_count() == 2
    assert server.groups() == [("m_0", "KIND_MODEL", 1)]


def test_a_failed_update_keeps_the_version_serving(server: Server) -> None:
    before = server.infer()
    status, body = server.load([{"kind": "KIND_GPU"}])
    reason = (
        "Invalid argument: instance group m_0 of model m has kind KIND_GPU but no GPUs are "
        "available"
    )
    assert (status, body) == (
        400,
        {"error": f"load failed for model 'm': version 1 is at READY state: {reason};\n"},
    )
    status, index = server.call("POST", "/v2/repository/index")
    assert index == [{"name": "m", "version": "1", "state": "READY", "reason": reason}]
    assert server.call("GET", "/v2/health/ready")[0] == 200
    assert server.infer() == (before[0] + 1, before[1])
    assert server.groups() == [("m_0", "KIND_CPU", 1)]
    assert server.events() == []
    # the next update that succeeds clears the reason
    assert server.load([{"count": 2}]) == (200, None)
    assert server.call("POST", "/v2/repository/index")[1] == [
        {"name": "m", "version": "1", "state": "READY"}
    ]


def test_a_new_instance_that_fails_to_start_undoes_the_update(server: Server) -> None:
    params = {"parameters": {"fail_third": {"string_value": "yes"}}}
    assert server.load([{"count": 1}], **params) == (200, None)  # (a full reload)
    assert sorted(server.events()) == ["fini m_0_0", "init m_0_0"]
    before = server.infer()
    status, body = server.load([{"count": 3}], **params)
    assert status == 400
    assert body["error"].startswith(
        "load failed for model 'm': version 1 is at READY state: Internal: "
        "RuntimeError: no third instance"
    )
    assert server.events() == ["init m_0_1", "fini m_0_1"]
    assert server.infer() == (before[0] + 1, before[1])
    assert server.groups() == [("m_0", "KIND_CPU", 1)]
    assert server.load([{"count": 2}], **params) == (200, None)
    assert server.events() == ["init m_0_1"]


def test_a_first_load_writes_pycache_so_the_next_load_is_a_full_reload(
    tmp_path: Path,
) -> None:
    with _start(tmp_path, "process", {}, compiled=False) as s:
        server = Server(s.url, tmp_path, {})
        server.events()
        first = server.infer()
        # loading the model wrote model.py's bytecode into its folder: changed on disk
        assert server.load() == (200, None)
        assert sorted(server.events()) == ["fini m_0_0", "init m_0_0"]
        second = server.infer()
        assert second[1] != first[1] and server.inference_count() == 1
        # unchanged since: the same load keeps what serves
        assert server.load() == (200, None)
        assert server.events() == []
        assert server.infer() == (second[0] + 1, second[1])


@pytest.mark.parametrize("isolation", ["process", "in-process"])
@pytest.mark.parametrize("strategy", [SEQUENCE, OLDEST], ids=["direct", "oldest"])
def test_a_sequence_stays_on_its_instance_until_it_ends(
    tmp_path: Path, isolation: str, strategy: dict[str, Any]
) -> None:
    with _start(tmp_path, isolation, strategy, compiled=True) as s:
        server = Server(s.url, tmp_path, strategy)
        assert server.load([{"count": 2}]) == (200, None)
        server.events()
        _, kept = server.infer(sequence=(100, True, False))  # (the first free slot's)
        _, leaving = server.infer(sequence=(200, True, False))
        assert kept != leaving
        assert server.load([{"count": 1}]) == (200, None)
        assert server.events() == []  # (sequence 200 still holds its instance)
        assert server.infer(sequence=(200, False, False))[1] == leaving
        assert server.infer(sequence=(100, False, True))[1] == kept
        assert server.infer(sequence=(300, True, True))[1] == kept  # (new ones: the other)
        assert server.events() == []
        assert server.infer(sequence=(200, False, True))[1] == leaving
        assert server.events() == ["fini m_0_1"]
        assert server.inference_count() == 6


def test_the_config_file_edited_updates_in_place_a_model_file_edited_reloads(
    tmp_path: Path,
) -> None:
    with _start(tmp_path, "process", {}, compiled=True) as s:
        server = Server(s.url, tmp_path, {})
        server.events()
        first = server.infer()
        config = tmp_path / "repo" / "m" / "config.pbtxt"
        config.write_text(config.read_text().replace("count: 1", "count: 2"))
        assert server.load() == (200, None)
        assert server.events() == ["init m_0_1"]
        assert server.inference_count() == 1
        assert server.groups() == [("m_0", "KIND_CPU", 2)]
        # a file of the model changed: the model loads afresh, whatever else changed
        model = tmp_path / "repo" / "m" / "1" / "model.py"
        model.write_text(model.read_text() + "\n# edited\n")
        compileall.compile_dir(tmp_path / "repo", quiet=1)
        assert server.load([{"count": 3}]) == (200, None)
        assert sorted(server.events()) == [
            "fini m_0_0", "fini m_0_1", "init m_0_0", "init m_0_1", "init m_0_2"
        ]  # fmt: skip
        assert server.inference_count() == 0
        assert first[1] not in {server.infer()[1] for _ in range(3)}
