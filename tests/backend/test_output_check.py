"""``--backend-config=python,check-outputs=true``: warnings for responses whose outputs
disagree with the configuration (in-process instances), once per finding."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import tritonhttp
from tritonhttp.server import _launch
from tritonhttp.testing._load_log import message_of

CONFIG = """backend: "python"
max_batch_size: 4
input [{ name: "IN" data_type: TYPE_FP32 dims: [2] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [2] }]
"""
MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor("OUT", np.zeros((1, 3), np.float64)),
                    pb_utils.Tensor("TYPO", np.zeros(1, np.float32)),
                ]
            )
            for r in requests
        ]
"""
EXPECTED = [
    "model 'sloppy' version 1: output 'OUT' is FP64, the configuration says FP32",
    "model 'sloppy' version 1: output 'OUT' has shape [1, 3], the configuration says "
    "[-1, 2] (-1: any size, the first is the batch)",
    "model 'sloppy' version 1: output 'TYPO' is not in the configuration (outputs: OUT); "
    "it is dropped",
]


def _repository(root: Path) -> Path:
    (root / "sloppy" / "1").mkdir(parents=True)
    (root / "sloppy" / "config.pbtxt").write_text(CONFIG)
    (root / "sloppy" / "1" / "model.py").write_text(MODEL)
    return root


def _infer_twice(url: str) -> np.ndarray:  # type: ignore[type-arg]
    with tritonhttp.InferenceServerClient(url) as client:
        for _ in range(2):
            tensor = tritonhttp.InferInput("IN", [1, 2], "FP32")
            tensor.set_data_from_numpy(np.zeros((1, 2), np.float32))
            result = client.infer("sloppy", [tensor])
    out = result.as_numpy("OUT")
    assert out is not None
    return out


def _warnings(log: str) -> list[str]:
    return [message_of(line) for line in log.splitlines() if line.startswith("W")]


def test_warns_once_per_finding_in_process(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    flags = ("--python-isolation=in-process", "--backend-config=python,check-outputs=true")
    with _launch.running(repo, *flags) as server:
        out = _infer_twice(server.url)
        time.sleep(0.2)
        log = server.log()
    assert out.shape == (1, 3)  # the answer is what the model returned, as in Triton
    assert sorted(_warnings(log)) == sorted(EXPECTED), log


def test_off_by_default_and_in_process_only(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    with _launch.running(repo, "--python-isolation=in-process") as server:
        _infer_twice(server.url)
        assert _warnings(server.log()) == []
    flags = ("--python-isolation=process", "--backend-config=python,check-outputs=true")
    with _launch.running(repo, *flags) as server:
        _infer_twice(server.url)
        assert _warnings(server.log()) == [
            "model 'sloppy': check-outputs applies to in-process instances only; this model "
            "runs in worker processes"
        ]


def test_a_bad_value_fails_the_load(tmp_path: Path) -> None:
    repo = _repository(tmp_path)
    flags = ("--backend-config=python,check-outputs=maybe", "--exit-on-error=false")
    with (
        _launch.running(repo, *flags, wait_ready=False) as server,
        tritonhttp.InferenceServerClient(server.url) as client,
    ):
        (entry,) = client.get_model_repository_index()
    assert entry["state"] == "UNAVAILABLE"
    assert "check-outputs takes true or false, not 'maybe'" in entry["reason"]
