"""A model repository for the cancellation tests, written to a scratch folder.

* ``cancellable``: one instance, no batching. For input ``ID`` (INT32 [1]) it marks
  ``started.<id>``, then checks ``request.is_cancelled()`` every 20 ms for ``SECONDS``
  (INT32 [1]) seconds: it marks ``cancelled.<id>`` and stops when cancelled, else
  marks ``finished.<id>``. Answers ``OUT`` = ``ID``.
* ``cancellable_stream``: the same, decoupled: it sends a response every 50 ms and
  watches its response sender's ``is_cancelled()`` instead.

The marks are files in the folder named by the ``marks`` parameter of each model.
"""

from __future__ import annotations

import time
from pathlib import Path

_COMMON = """
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class _Marks:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.marks = config["parameters"]["marks"]["string_value"]

    def mark(self, what, ident):
        with open(os.path.join(self.marks, f"{what}.{ident}"), "w") as f:
            f.write(repr(time.time()))
"""

_PLAIN = (
    _COMMON
    + """

class TritonPythonModel(_Marks):
    def execute(self, requests):
        responses = []
        for request in requests:
            ident = _scalar(request, "ID")
            self.mark("started", ident)
            end = time.monotonic() + _scalar(request, "SECONDS")
            while time.monotonic() < end:
                if request.is_cancelled():
                    self.mark("cancelled", ident)
                    break
                time.sleep(0.02)
            else:
                self.mark("finished", ident)
            out = pb_utils.Tensor("OUT", np.array([ident], dtype=np.int32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""
)

_STREAM = (
    _COMMON
    + """

class TritonPythonModel(_Marks):
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            ident = _scalar(request, "ID")
            self.mark("started", ident)
            end = time.monotonic() + _scalar(request, "SECONDS")
            while time.monotonic() < end:
                if sender.is_cancelled():
                    self.mark("cancelled", ident)
                    break
                out = pb_utils.Tensor("OUT", np.array([ident], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse([out]))
                time.sleep(0.05)
            else:
                self.mark("finished", ident)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""
)

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [
  {{ name: "ID" data_type: TYPE_INT32 dims: [ 1 ] }},
  {{ name: "SECONDS" data_type: TYPE_INT32 dims: [ 1 ] }}
]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
parameters {{ key: "marks" value: {{ string_value: "{marks}" }} }}
{extra}
"""


def write_repo(root: Path) -> tuple[Path, Path]:
    """Write the repository under ``root``; (repository, marks folder)."""
    repo = root / "repo"
    marks = root / "marks"
    marks.mkdir(parents=True)
    for name, source, extra in (
        ("cancellable", _PLAIN, ""),
        ("cancellable_stream", _STREAM, "model_transaction_policy { decoupled: true }"),
    ):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(source)
        (repo / name / "config.pbtxt").write_text(
            _CONFIG.format(name=name, marks=marks, extra=extra)
        )
    return repo, marks


def wait_mark(marks: Path, what: str, ident: int, timeout: float = 30.0) -> bool:
    """Wait until the mark ``what.ident`` exists (False when it did not in time)."""
    path = marks / f"{what}.{ident}"
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists():
            return True
        time.sleep(0.01)
    return False


def has_mark(marks: Path, what: str, ident: int) -> bool:
    return (marks / f"{what}.{ident}").exists()
