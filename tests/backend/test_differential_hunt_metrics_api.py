"""The custom-metrics API of Python models side by side with real Triton 2.51
(``tests/repos/hunt_metrics_api``): what each call returns or raises in the model (family
and label names, descriptions, kinds, buckets, argument types, NaN/inf and large values)
and how ``/metrics`` prints the families; how long series last once their ``Metric`` or
``MetricFamily`` objects are gone.

Left as they are (ours differs from Triton on purpose): Triton writes a description with
``\\`` or a newline raw into its ``# HELP`` line and a histogram's ``le`` label twice when
the model gives one (both break the text format; ours escapes, and its ``le`` wins);
Triton keeps a model's families after the model is unloaded (ours drops them). The order
of the series inside one family follows a hash table in Triton, so it is compared as a
set.

Triton 2.51 sometimes aborts (``boost::interprocess::lock_exception``) after a family or
series the server refuses (bad name, bad label name, unsorted buckets, kind conflict), so
the checks that end so run against our server only, pinned with Triton's words."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from ._http import exchange, mode_call
from .conftest import Start

FLAGS = ("--model-control-mode=explicit", "--load-model=api_checks", "--load-model=lifetime")
ADDRESS = re.compile(r" at 0x[0-9a-f]+>")
INSTANCE = "api_checks_0"
#: checks refused by the server side (they may crash Triton: see the module's docstring)
REFUSED = frozenset({
    "b_dup", "b_unsorted", "dup_same", "lbl_bad_name", "lbl_dunder", "lbl_empty_key",
    "lbl_key_int", "lbl_space", "lbl_val_none", "name_dash", "name_digit", "name_dunder",
    "name_empty", "name_nonascii",
})  # fmt: skip


@pytest.fixture(scope="module")
def repo(model_repo: Any) -> Path:
    """``tests/repos/hunt_metrics_api``, materialised."""
    return Path(model_repo("hunt_metrics_api"))


def _results(url: str, skip: frozenset[str]) -> dict[str, Any]:
    """The checks of ``api_checks`` but ``skip``, one per request, object addresses blanked."""
    names = mode_call(url, "api_checks", -1)
    seen: dict[str, Any] = {}
    for mode, name in enumerate(names):
        if name not in skip:
            seen.update(mode_call(url, "api_checks", mode))
    return dict(json.loads(ADDRESS.sub(" at 0x>", json.dumps(seen))))


def _families(metrics_url: str) -> list[tuple[str, ...]]:
    """The custom families' lines in ``/metrics``: each family's header lines, then its
    sample lines sorted."""
    text = exchange(metrics_url, "GET", "/metrics").body.decode()
    out: list[tuple[str, ...]] = []
    head: list[str] = []
    samples: list[str] = []
    for line in [*text.splitlines(), "# HELP end"]:
        if line.startswith("# ") and samples:
            out.append((*head, *sorted(samples)))
            head, samples = [], []
        if line.startswith("# "):
            head.append(line)
        else:
            samples.append(line)
    return [family for family in out if " mh_" in family[0]]


def _view(server: Any, skip: frozenset[str]) -> tuple[dict[str, Any], Any, list[tuple[str, ...]]]:
    results = _results(server.url, skip)
    lifetime = mode_call(server.url, "lifetime", 0)
    return results, lifetime, _families(server.metrics_url)


@pytest.fixture(scope="module")
def triton(real_triton_factory: Any, repo: Path) -> tuple[dict[str, Any], Any, Any]:
    """What real Triton's models saw, and its custom families afterwards."""
    return _view(real_triton_factory(repo, *FLAGS), REFUSED)


@pytest.fixture(scope="module")
def view(ours: Start, repo: Path) -> tuple[dict[str, Any], Any, Any]:
    """The same from our server (in each isolation mode)."""
    return _view(ours(repo, *FLAGS), frozenset())


@pytest.mark.real_triton
def test_model_sees_what_triton_shows(triton: Any, view: Any) -> None:
    """Each check returns the same value or raises the same exception type and text."""
    theirs = triton[0]
    ours = {name: answer for name, answer in view[0].items() if name not in REFUSED}
    assert {k: v for k, v in ours.items() if v != theirs.get(k)} == {}
    assert ours == theirs


@pytest.mark.real_triton
def test_custom_families_print_as_in_triton(triton: Any, view: Any) -> None:
    """The same families in the same order, with the same header and sample lines (the
    ``lifetime`` model's families aside: the two models load side by side)."""
    assert _checks_families(view[2]) == _checks_families(triton[2])


def _checks_families(families: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [family for family in families if " mh_life" not in family[0]]


@pytest.mark.real_triton
def test_series_lifetime_as_in_triton(triton: Any, view: Any) -> None:
    """A dropped ``Metric`` leaves its series; a deleted family handle takes its series."""
    assert view[1] == triton[1]
    lines = [family for family in view[2] if family[0].startswith("# HELP mh_life ")]
    assert lines == [family for family in triton[2] if family[0].startswith("# HELP mh_life ")]


def _fail(prefix: str, message: str) -> dict[str, str]:
    text = f"{prefix}: Failed to process the request for model '{INSTANCE}', message: {message}"
    return {"TritonModelException": text}


CREATE_METRIC = "Error when creating Metric"
FAMILY_INIT = (
    "__init__(): incompatible constructor arguments. The following argument types are "
    "supported:\n    1. c_python_backend_utils.MetricFamily(name: str, description: str, "
    "kind: c_python_backend_utils.MetricKind)\n\nInvoked with: "
)
INCREMENT = (
    "increment(): incompatible function arguments. The following argument types are "
    "supported:\n    1. (self: c_python_backend_utils.Metric, arg0: float) -> None\n\n"
    "Invoked with: <c_python_backend_utils.Metric object at 0x>, "
)

#: what Triton 2.51 answers (a selection; the differential tests compare every check)
EXPECTED = {
    "name_dunder": _fail("Error when creating MetricFamily", "Invalid metric name"),
    "name_colon_lead": {"ok": 1},
    "kind_int": {"TypeError": FAMILY_INIT + "'mh_k', 'd', 1"},
    "kind_eq_int": {"ok": True},
    "str_kind": {"ok": "MetricKind.GAUGE"},
    "lbl_bad_name": _fail(CREATE_METRIC, "Invalid label name"),
    "lbl_dunder": _fail(CREATE_METRIC, "Invalid label name"),
    "lbl_empty_key": _fail(CREATE_METRIC, "Invalid label name"),
    "lbl_key_int": _fail(CREATE_METRIC, "Invalid label name"),
    "lbl_val_none": _fail(CREATE_METRIC, "attempt to access JSON non-string as string"),
    "b_unsorted": _fail(CREATE_METRIC, "Bucket Boundaries must be strictly sorted"),
    "b_dup": _fail(CREATE_METRIC, "Bucket Boundaries must be strictly sorted"),
    "b_nan": {"ok": None},
    "b_tuple": {"TritonModelException": "Failed to create metric. Buckets must be a list."},
    "b_np": {"TritonModelException": "Failed to create metric. Buckets must be a list."},
    "b_str": {
        "RuntimeError": "Unable to cast Python instance to C++ type (#define "
        "PYBIND11_DETAILED_ERROR_MESSAGES or compile in debug mode for details)"
    },
    "c_inc_str": {"TypeError": INCREMENT + "'1'"},
    "c_inc_none": {"TypeError": INCREMENT + "None"},
    "c_inc_nan": {"ok": "nan"},
    "g_kwarg": {"TypeError": INCREMENT.replace("increment", "set")[:-2] + "; kwargs: value=1"},
    "dup_same": _fail("Error when creating MetricFamily",
                      "Family name already exists with different type"),
    "name_empty": _fail("Error when creating MetricFamily", "Invalid metric name"),
    "name_nonascii": _fail("Error when creating MetricFamily", "Invalid metric name"),
}  # fmt: skip

EXPECTED_LINES = [
    ("# TYPE mh_de gauge", "mh_de 1"),  # no HELP line for an empty description
    ("# HELP mh_h4 d", "# TYPE mh_h4 histogram", 'mh_h4_bucket{le="+Inf"} 1',
     'mh_h4_bucket{le="-2.5"} 1', 'mh_h4_bucket{le="0"} 1', 'mh_h4_bucket{le="0.1"} 1',
     'mh_h4_bucket{le="1e+20"} 1', "mh_h4_count 1", "mh_h4_sum -3"),
    ("# HELP mh_h5 d", "# TYPE mh_h5 histogram", 'mh_h5_bucket{le="+Inf"} 1',
     'mh_h5_bucket{le="+Inf"} 1', 'mh_h5_bucket{le="1"} 0', "mh_h5_count 1", "mh_h5_sum 5"),
    ("# HELP mh_h6 d", "# TYPE mh_h6 histogram", 'mh_h6_bucket{le="+Inf"} 1',
     'mh_h6_bucket{le="1"} 0', 'mh_h6_bucket{le="Nan"} 1', "mh_h6_count 1", "mh_h6_sum 5"),
    ("# HELP mh_h10 d", "# TYPE mh_h10 histogram", 'mh_h10_bucket{le="+Inf"} 1',
     'mh_h10_bucket{le="1"} 1', "mh_h10_count 1", "mh_h10_sum Nan"),  # NaN: first bucket
    ("# HELP mh_life lifetime", "# TYPE mh_life gauge", 'mh_life{a="dropped"} 3',
     'mh_life{a="exec"} 8', 'mh_life{a="kept"} 5'),
]  # fmt: skip


def test_checks_answer_as_triton_does(view: Any) -> None:
    """Triton's answers, pinned (they run without real Triton)."""
    results, lifetime, families = view
    assert {name: results[name] for name in EXPECTED} == EXPECTED
    deleted = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."
    assert lifetime["kept"] == {"ok": 5.0}
    assert deleted in lifetime["via_other"]["TritonModelException"]
    assert deleted in lifetime["orphan"]["TritonModelException"]
    for family in EXPECTED_LINES:
        assert family in families
    assert not any("mh_life_tmp" in family[0] for family in families)


def test_series_newest_first(ours: Start, repo: Path) -> None:
    """Inside a family, the newest series is listed first (Triton's usual order)."""
    server = ours(repo, *FLAGS)
    deadline = time.monotonic() + 10
    text = ""
    while "mh_life{" not in text and time.monotonic() < deadline:
        text = exchange(server.metrics_url, "GET", "/metrics").body.decode()
    order = [line.split("}")[0] for line in text.splitlines() if line.startswith("mh_life{")]
    assert order.index('mh_life{a="kept"') < order.index('mh_life{a="dropped"')
