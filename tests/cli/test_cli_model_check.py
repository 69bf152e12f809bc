"""``triton-cli model check``: what the server would say at load, located, without serving.

One repository holds a model for each kind of problem; ``check`` runs on it as a user
runs it (the installed script, a subprocess) in both isolation modes, and its verdicts
are compared with what the bundled server itself reports for the same repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _repos import ECHO_MODEL
from cli_helpers import run_script

import tritonhttp
from tritonhttp.server import _launch
from tritonhttp.testing._load_log import message_of

TESTS = Path(__file__).resolve().parents[1]
ENSEMBLES = TESTS / "repos" / "ensemble_basic"

CONFIG = """backend: "python"
max_batch_size: {batch}
input [{{ name: "IN" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "OUT" data_type: TYPE_FP32 dims: [4] }}]
"""
DECOUPLED = CONFIG.format(batch=0) + "model_transaction_policy { decoupled: true }\n"
STREAM = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            for _ in range(2):
                out = pb_utils.Tensor("OUT", np.zeros(4, np.{dtype}))
                sender.send(pb_utils.InferenceResponse([out]))
            {fail}
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""
#: name -> (config.pbtxt, model.py)
MODELS = {
    "stream": (DECOUPLED, STREAM.format(dtype="float32", fail="")),
    "stream_fails": (DECOUPLED, STREAM.format(dtype="float32", fail="raise ValueError('x')")),
    "stream_int": (DECOUPLED, STREAM.format(dtype="int32", fail="")),
    "good": (CONFIG.format(batch=0), ECHO_MODEL),
    "good_batched": (CONFIG.format(batch=4), ECHO_MODEL),
    "config_syntax": (
        'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 }\n',
        ECHO_MODEL,
    ),
    "config_invalid": (
        CONFIG.format(batch=0).replace(" dims: [4] }]\noutput", " }]\noutput"),
        ECHO_MODEL,
    ),
    "syntax": (CONFIG.format(batch=0), "import numpy\nx = 1 +\n"),
    "imports": (CONFIG.format(batch=0), "import numpy\nimport no_such_module_here\n"),
    "initialize": (
        CONFIG.format(batch=0),
        ECHO_MODEL + "\n    def initialize(self, args):\n        raise ValueError('no weights')\n",
    ),
    "outputs": (
        CONFIG.format(batch=0),
        "import numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n    def execute(self, requests):\n"
        '        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", '
        'np.zeros(3, np.int64)), pb_utils.Tensor("EXTRA", np.zeros(1))]) for r in requests]\n',
    ),
    "missing": (
        CONFIG.format(batch=0),
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n    def execute(self, requests):\n"
        "        return [pb_utils.InferenceResponse([]) for r in requests]\n",
    ),
}


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("check") / "models"
    for name, (config, model) in MODELS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
        (root / name / "1" / "model.py").write_text(model)
    return root


def problems(reports: dict[str, object], name: str) -> list[dict[str, object]]:
    entry = reports[name]
    assert isinstance(entry, dict)
    found = entry["problems"]
    assert isinstance(found, list)
    return found


@pytest.mark.parametrize("isolation", ["process", "in-process"])
def test_each_problem_is_found_and_located(repository: Path, isolation: str) -> None:
    done = run_script(["--json", "model", "check", str(repository), "--isolation", isolation])
    assert done.code == 1, done.stderr
    answer = done.json()
    assert answer["ok"] is False
    reports = {m["name"]: m for m in answer["models"]}
    assert set(reports) == set(MODELS)
    for name in ("good", "good_batched"):
        assert reports[name]["ok"] and reports[name]["ran"], reports[name]
    (parse,) = problems(reports, "config_syntax")
    assert parse["kind"] == "config" and (parse["line"], parse["column"]) == (3, 1)
    assert str(parse["file"]).endswith("config_syntax/config.pbtxt")
    (invalid,) = problems(reports, "config_invalid")
    assert "model input 'IN' must specify 'dims'" in str(invalid["message"])
    for name, line, text, where in (
        ("syntax", 2, "SyntaxError: invalid syntax", None),
        ("imports", 2, "No module named 'no_such_module_here'", "<module>"),
        ("initialize", 14, "ValueError: no weights", "initialize"),
    ):
        (problem,) = problems(reports, name)
        assert problem["kind"] == "model", problem
        assert str(problem["file"]).endswith(f"{name}/1/model.py"), problem
        assert problem["line"] == line and text in str(problem["message"]), problem
        if where:
            assert f"(in {where})" in str(problem["message"])
    messages = sorted(str(p["message"]) for p in problems(reports, "outputs"))
    # the server drops an output its configuration lacks before any client sees it: the
    # backend's own check (in-process instances) reports it
    dropped = ["output 'EXTRA' is not in the configuration (outputs: OUT); it is dropped"]
    assert messages == sorted(
        [
            "output 'OUT' has shape [3], the configuration says [4] (-1: any size)",
            "output 'OUT' is INT64, the configuration says FP32",
            *(dropped if isolation == "in-process" else []),
        ]
    ), messages
    (missing,) = problems(reports, "missing")
    assert missing["message"] == "output 'OUT' was not returned"
    # decoupled models answer through the generate extension's stream
    assert reports["stream"]["ok"] and reports["stream"]["notes"] == ["decoupled: 2 responses"]
    (failed,) = problems(reports, "stream_fails")
    assert failed["kind"] == "run" and "ValueError: x" in str(failed["message"])
    int_problems = [str(p["message"]) for p in problems(reports, "stream_int")]
    # (a stream's outputs carry no data type: the backend's check sees it, in-process)
    wrong_type = ["output 'OUT' is INT32, the configuration says FP32"]
    assert int_problems == (wrong_type if isolation == "in-process" else [])


def test_says_what_the_server_says(repository: Path) -> None:
    """Each load failure check reports is the reason the server gives for it."""
    done = run_script(["--json", "model", "check", str(repository), "--no-run"])
    reports = {m["name"]: m for m in done.json()["models"]}
    with _launch.running(repository, "--exit-on-error=false", wait_ready=False) as server:
        with tritonhttp.InferenceServerClient(server.url) as client:
            index = client.get_model_repository_index()
        log = server.log()
    reasons = {e["name"]: e.get("reason", "") for e in index}
    for name in ("syntax", "imports", "initialize", "config_invalid"):
        (problem,) = problems(reports, name)
        first_line = str(problem["message"]).split(" (in ")[0]
        assert first_line in reasons[name], (first_line, reasons[name])
    (parse,) = problems(reports, "config_syntax")
    assert any(str(parse["message"]) in message_of(line) for line in log.splitlines())


def test_text_output_and_no_run(repository: Path) -> None:
    done = run_script(["model", "check", str(repository / "outputs"), "--no-run"])
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("outputs: ok (loaded)")
    done = run_script(["model", "check", str(repository / "imports")])
    assert done.code == 1
    lines = done.stdout.splitlines()
    assert lines[0].endswith("imports: 1 problem(s)")
    assert lines[1].strip().startswith(str(Path("imports") / "1" / "model.py")) or (
        "imports/1/model.py:2:" in lines[1]
    )


def test_ensemble_maps_are_validated() -> None:
    done = run_script(["--json", "model", "check", str(ENSEMBLES / "ens_dtype"), "--no-run"])
    assert done.code == 1, done.stdout + done.stderr
    (report,) = done.json()["models"]
    assert "inconsistent data type" in json.dumps(report["problems"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/folder"], "no such folder"),
        (["{repo}", "--load", "absent"], "no model 'absent'"),
    ],
)
def test_usage_errors_exit_2(repository: Path, args: list[str], message: str) -> None:
    done = run_script(["model", "check", *(a.format(repo=repository) for a in args)])
    assert done.code == 2
    assert message in done.stderr
