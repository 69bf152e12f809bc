"""A worker whose model is slow lowers its priority (`_priority`, ``slow-model-nice``).

The rule: after ``COUNT`` executes in a row slower than ``SLOW_NS`` per request, the
worker raises its nice value, once; a quick model's worker keeps its priority, and 0
turns the rule off. End to end, the models report their worker's own nice value.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tritonhttp
from tritonhttp.server import _launch
from tritonhttp.server.backends.python._priority import SlowModelPriority
from tritonhttp.server.backends.python._settings import BackendSettings
from tritonhttp.server.core._errors import CoreError

SLOW = SlowModelPriority.SLOW_NS
COUNT = SlowModelPriority.COUNT


def _policy(nice: int = 10) -> tuple[SlowModelPriority, list[int]]:
    lowered: list[int] = []
    return SlowModelPriority(nice, lambda by: lowered.append(by) or True), lowered


def test_it_lowers_once_after_count_slow_executes_in_a_row() -> None:
    policy, lowered = _policy()
    for _ in range(COUNT - 1):
        policy.executed(SLOW + 1, 1)
    assert lowered == []
    policy.executed(SLOW + 1, 1)
    assert lowered == [10]
    for _ in range(3 * COUNT):
        policy.executed(10 * SLOW, 1)
    assert lowered == [10], "it lowered the priority more than once"


def test_a_quick_execute_starts_the_count_again() -> None:
    policy, lowered = _policy()
    for _ in range(5):
        for _ in range(COUNT - 1):
            policy.executed(SLOW + 1, 1)
        policy.executed(SLOW // 2, 1)
    assert lowered == []


def test_the_time_counts_per_request_of_the_batch() -> None:
    policy, lowered = _policy()
    for _ in range(3 * COUNT):
        policy.executed(8 * SLOW, 10)  # a batch of 10: 0.8 of the limit each
    assert lowered == []
    for _ in range(COUNT):
        policy.executed(11 * SLOW, 10)
    assert lowered == [10]


def test_zero_never_lowers() -> None:
    policy, lowered = _policy(0)
    for _ in range(3 * COUNT):
        policy.executed(100 * SLOW, 1)
    assert lowered == []


def test_the_backend_option() -> None:
    assert BackendSettings.parse({}).slow_model_nice == 10
    assert BackendSettings.parse({"slow-model-nice": "0"}).slow_model_nice == 0
    assert BackendSettings.parse({"slow-model-nice": " 19 "}).slow_model_nice == 19
    for bad, text in (("-1", "between 0 and 39"), ("40", "between 0 and 39"), ("x", "integer")):
        with pytest.raises(CoreError, match=text):
            BackendSettings.parse({"slow-model-nice": bad})


LOWER_EVERY_THREAD = """
import os, threading
from tritonhttp.server.support._platform import lower_priority

def nice(tid): return os.getpriority(os.PRIO_PROCESS, tid)
started = threading.Event(); stop = threading.Event(); seen = []
def before():
    seen.append(threading.get_native_id()); started.set(); stop.wait()
t = threading.Thread(target=before); t.start(); started.wait()
assert lower_priority(4)
after = []
t2 = threading.Thread(target=lambda: after.append(nice(0))); t2.start(); t2.join()
print(nice(0), nice(seen[0]), after[0])
stop.set(); t.join()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nice values per thread")
def test_lower_priority_reaches_every_thread() -> None:
    start = os.getpriority(os.PRIO_PROCESS, 0)
    out = subprocess.run(
        [sys.executable, "-c", LOWER_EVERY_THREAD], capture_output=True, text=True, check=True
    ).stdout.split()
    expected = str(min(19, start + 4))
    assert out == [expected] * 3, "main thread, a running thread, a thread started later"


CONFIG = """backend: "python"
max_batch_size: 0
input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "NICE" data_type: TYPE_INT32 dims: [1] }]
"""
MODEL = """import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils

DELAY = %r


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(DELAY)
        nice = os.getpriority(os.PRIO_PROCESS, 0)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("NICE", np.array([nice], np.int32))])
            for _ in requests
        ]
"""


def _repository(root: Path) -> Path:
    for name, delay in (("slow", 0.002), ("quick", 0.0)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG)
        (root / name / "1" / "model.py").write_text(MODEL % delay)
    return root


def _nices(url: str, model: str, n: int) -> list[int]:
    nices = []
    with tritonhttp.InferenceServerClient(url) as client:
        for _ in range(n):
            tensor = tritonhttp.InferInput("IN", [1], "FP32")
            tensor.set_data_from_numpy(np.zeros(1, np.float32))
            out = client.infer(model, [tensor]).as_numpy("NICE")
            assert out is not None
            nices.append(int(out[0]))
    return nices


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes, Linux")
def test_a_slow_models_worker_steps_back_and_a_quick_ones_does_not(tmp_path: Path) -> None:
    start = os.getpriority(os.PRIO_PROCESS, 0)
    with _launch.running(_repository(tmp_path)) as server:
        slow = _nices(server.url, "slow", COUNT + 4)
        quick = _nices(server.url, "quick", 3 * COUNT)
    lowered = min(19, start + 10)
    assert slow == [start] * COUNT + [lowered] * 4, "the worker reports its nice value"
    assert quick == [start] * (3 * COUNT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker processes, Linux")
def test_slow_model_nice_zero_keeps_the_priority(tmp_path: Path) -> None:
    start = os.getpriority(os.PRIO_PROCESS, 0)
    flag = "--backend-config=python,slow-model-nice=0"
    with _launch.running(_repository(tmp_path), flag) as server:
        assert _nices(server.url, "slow", COUNT + 4) == [start] * (COUNT + 4)
