"""Custom-metric API checks: MODE -1 lists the checks, MODE i runs the i-th (sorted by
name) and answers in RESULT what it returned or raised."""
import json
import math

import numpy as np
import triton_python_backend_utils as pb_utils

PB = pb_utils
KEEP = []

def attempt(fn):
    try:
        value = fn()
        if isinstance(value, float) and not math.isfinite(value):
            value = repr(value)
        return {"ok": value if isinstance(value, (int, float, str, type(None))) else "done"}
    except Exception as e:
        return {type(e).__name__: str(e)}

def fam(name, desc, kind):
    f = PB.MetricFamily(name, desc, kind); KEEP.append(f); return f

def met(f, **kw):
    m = f.Metric(**kw); KEEP.append(m); return m

class TritonPythonModel:
    def initialize(self, args):
        # (Triton's pb_utils has no MetricFamily while model.py is being imported)
        global C, G, H
        C, G, H = PB.MetricFamily.COUNTER, PB.MetricFamily.GAUGE, PB.MetricFamily.HISTOGRAM
        self.init_fam = fam("mh_init", "from init", G)
        met(self.init_fam, labels={"w": "init"}).set(7)

    def execute(self, requests):
        checks = {
            "name_empty": lambda: fam("", "d", G) and 1,
            "name_digit": lambda: fam("1abc", "d", G) and 1,
            "name_colon": lambda: fam("a:b", "d", G) and 1,
            "name_nonascii": lambda: fam("m\u00e9t", "d", G) and 1,
            "name_nv": lambda: fam("nv_mh_x", "d", G) and 1,
            "name_dash": lambda: fam("a-b", "d", G) and 1,
            "name_colon_lead": lambda: fam(":mh_colon", "d", G) and 1,
            "name_dunder": lambda: fam("__x", "d", G) and 1,
            "name_none": lambda: fam(None, "d", G) and 1,
            "desc_none": lambda: fam("mh_dn", None, G) and 1,
            "desc_empty": lambda: met(fam("mh_de", "", G)).set(1),
            "desc_nonascii": lambda: met(fam("mh_desc2", "caf\u00e9 \u2603", G)).set(1),
            "kind_int": lambda: fam("mh_k", "d", 1) and 1,
            "kind_str": lambda: fam("mh_k", "d", "COUNTER") and 1,
            "kind_none": lambda: fam("mh_k", "d", None) and 1,
            "dup_same": lambda: (met(fam("mh_dup", "first", C)).increment(1), met(fam("mh_dup", "second", C)).value())[1],
            "dup_kind": lambda: fam("mh_dup", "first", H) and 1,
            "lbl_bad_name": lambda: met(fam("mh_lbl", "d", G), labels={"1x": "a"}).set(1),
            "lbl_space": lambda: met(fam("mh_lbl", "d", G), labels={"a b": "a"}).set(2),
            "lbl_dunder": lambda: met(fam("mh_lbl", "d", G), labels={"__x": "a"}).set(3),
            "lbl_empty_key": lambda: met(fam("mh_lbl", "d", G), labels={"": "a"}).set(4),
            "lbl_val_escape": lambda: met(fam("mh_lbl2", "d", G), labels={"v": 'q"\\\nz'}).set(5),
            "lbl_val_empty": lambda: met(fam("mh_lbl3", "d", G), labels={"e": ""}).set(6),
            "lbl_val_none": lambda: met(fam("mh_lbl", "d", G), labels={"a": None}) and 1,
            "lbl_key_int": lambda: met(fam("mh_lbl", "d", G), labels={1: "a"}) and 1,
            "lbl_empty_dict": lambda: met(fam("mh_lbl", "d", G), labels={}).set(9),
            "lbl_order": lambda: (met(fam("mh_ord", "d", C), labels={"b": "1", "a": "2"}).increment(2), met(fam("mh_ord", "d", C), labels={"a": "2", "b": "1"}).value())[1],
            "b_unsorted": lambda: met(fam("mh_h1", "d", H), buckets=[5, 1, 3]).observe(2),
            "b_dup": lambda: met(fam("mh_h2", "d", H), buckets=[1, 1, 2]).observe(1),
            "b_empty": lambda: met(fam("mh_h3", "d", H), buckets=[]).observe(1),
            "b_neg": lambda: met(fam("mh_h4", "d", H), buckets=[-2.5, 0, 0.1, 1e20]).observe(-3),
            "b_inf": lambda: met(fam("mh_h5", "d", H), buckets=[1, float("inf")]).observe(5),
            "b_nan": lambda: met(fam("mh_h6", "d", H), buckets=[1, float("nan")]).observe(5),
            "b_str": lambda: met(fam("mh_h7", "d", H), buckets=["1"]).observe(1),
            "b_tuple": lambda: met(fam("mh_h8", "d", H), buckets=(1, 2)).observe(1),
            "b_np": lambda: met(fam("mh_h9", "d", H), buckets=np.array([1.0, 2.0])).observe(1),
            "b_obs_nan": lambda: met(fam("mh_h10", "d", H), buckets=[1]).observe(float("nan")),
            "b_obs_inf": lambda: met(fam("mh_h11", "d", H), buckets=[1]).observe(float("inf")),
            "b_diff_same_labels": lambda: (met(fam("mh_h12", "d", H), labels={"x": "1"}, buckets=[1]).observe(0.5), met(fam("mh_h12", "d", H), labels={"x": "1"}, buckets=[2, 3]).observe(2.5)),
            "c_inc_nan": lambda: (lambda m: (m.increment(float("nan")), m.value())[1])(met(fam("mh_c1", "d", C))),
            "c_inc_inf": lambda: (lambda m: (m.increment(float("inf")), m.value())[1])(met(fam("mh_c2", "d", C))),
            "c_inc_neg0": lambda: (lambda m: (m.increment(-0.0), m.value())[1])(met(fam("mh_c3", "d", C))),
            "c_inc_int": lambda: (lambda m: (m.increment(2), m.value())[1])(met(fam("mh_c4", "d", C))),
            "c_inc_str": lambda: met(fam("mh_c5", "d", C)).increment("1"),
            "c_inc_none": lambda: met(fam("mh_c5", "d", C)).increment(None),
            "c_inc_bool": lambda: (lambda m: (m.increment(True), m.value())[1])(met(fam("mh_c6", "d", C))),
            "c_big": lambda: (lambda m: (m.increment(1e300), m.value())[1])(met(fam("mh_c7", "d", C))),
            "c_big_int": lambda: (lambda m: (m.increment(123456789012), m.value())[1])(met(fam("mh_c8", "d", C))),
            "c_frac": lambda: (lambda m: (m.increment(0.1), m.increment(0.2), m.value())[2])(met(fam("mh_c9", "d", C))),
            "c_huge_int": lambda: met(fam("mh_c10", "d", C)).increment(10**400),
            "g_nan": lambda: (lambda m: (m.set(float("nan")), m.value())[1])(met(fam("mh_g1", "d", G))),
            "g_ninf": lambda: (lambda m: (m.set(float("-inf")), m.value())[1])(met(fam("mh_g2", "d", G))),
            "g_small": lambda: (lambda m: (m.set(1.5e-7), m.value())[1])(met(fam("mh_g3", "d", G))),
            "g_neg": lambda: (lambda m: (m.set(-12345678.25), m.value())[1])(met(fam("mh_g4", "d", G))),
            "g_1e16": lambda: (lambda m: (m.set(1e16), m.value())[1])(met(fam("mh_g5", "d", G))),
            "g_1e15": lambda: (lambda m: (m.set(123456789012345.0), m.value())[1])(met(fam("mh_g6", "d", G))),
            "g_np": lambda: (lambda m: (m.set(np.float32(2.5)), m.value())[1])(met(fam("mh_g7", "d", G))),
            "g_third": lambda: (lambda m: (m.set(1/3), m.value())[1])(met(fam("mh_g8", "d", G))),
            "g_value_type": lambda: type(met(fam("mh_g9", "d", G)).value()).__name__,
            "g_kwarg": lambda: met(fam("mh_g10", "d", G)).set(value=1),
            "metric_pos_labels": lambda: KEEP.append(fam("mh_g11", "d", G).Metric({"a": "b"})),
            "counter_total": lambda: met(fam("mh_x_total", "d", C)).increment(2),
            "lbl_key_bool": lambda: met(fam("mh_lbl4", "d", G), labels={True: "a"}) and 1,
            "b_bool": lambda: met(fam("mh_h13", "d", H), buckets=[False, True]).observe(0.5),
            "b_big_int": lambda: met(fam("mh_h14", "d", H), buckets=[10**400]) and 1,
            "obs_kwarg": lambda: met(fam("mh_h15", "d", H), buckets=[1]).observe(value=1),
            "value_arg": lambda: met(fam("mh_g12", "d", G)).value(1),
            "metric_dup_kw": lambda: fam("mh_g13", "d", G).Metric({"a": "b"}, labels={}) and 1,
            "metric_kw_unknown": lambda: fam("mh_g11", "d", G).Metric(foo=1) and 1,
            "family_kw": lambda: PB.MetricFamily(name="mh_kw", description="d", kind=G) and 1,
            "repr_kind": lambda: repr(G),
            "str_kind": lambda: str(G),
            "kind_eq_int": lambda: G == 1,
            "init_value": lambda: self.init_fam.Metric(labels={"w": "init"}).value(),
        }
        mode = int(pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0])
        names = sorted(checks)
        if mode < 0:
            result = names
        else:
            result = {names[mode]: attempt(checks[names[mode]])}
        text = json.dumps(result, sort_keys=True)
        return [PB.InferenceResponse([PB.Tensor("RESULT", np.array([text], dtype=object))]) for _ in requests]
