"""Runs the custom-metric argument checks in the server; RESULT lists what each raised."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


def attempt(fn):
    try:
        value = fn()
        return {"ok": value if isinstance(value, (int, float, str, type(None))) else "done"}
    except pb_utils.TritonModelException as e:
        return {"TritonModelException": str(e)}
    except TypeError:
        return {"TypeError": True}


class TritonPythonModel:
    def initialize(self, args):
        self.counter_family = pb_utils.MetricFamily("checks_counter", "c", pb_utils.MetricFamily.COUNTER)
        self.counter = self.counter_family.Metric(labels={"a": "1"})
        self.gauge_family = pb_utils.MetricFamily("checks_gauge", "g", pb_utils.MetricFamily.GAUGE)
        self.gauge = self.gauge_family.Metric()
        self.hist_family = pb_utils.MetricFamily("checks_hist", "h", pb_utils.MetricFamily.HISTOGRAM)
        self.hist = self.hist_family.Metric(buckets=[1.0, 5.0])

    def execute(self, requests):
        PB = pb_utils
        checks = {
            "counter_inc": lambda: (self.counter.increment(3), self.counter.value())[1],
            "counter_neg": lambda: self.counter.increment(-1),
            "counter_set": lambda: self.counter.set(1),
            "counter_observe": lambda: self.counter.observe(1),
            "gauge": lambda: (self.gauge.set(5), self.gauge.increment(-2), self.gauge.value())[2],
            "gauge_observe": lambda: self.gauge.observe(1),
            "hist_observe": lambda: self.hist.observe(3),
            "hist_value": lambda: self.hist.value(),
            "hist_inc": lambda: self.hist.increment(1),
            "missing_buckets": lambda: self.hist_family.Metric(),
            "unexpected_buckets": lambda: self.counter_family.Metric(buckets=[1]),
            "labels_not_dict": lambda: self.counter_family.Metric(labels=[1]),
            "label_not_str": lambda: self.counter_family.Metric(labels={"a": 1}),
            "same_labels_shared": lambda: self.counter_family.Metric(labels={"a": "1"}).value(),
            "kind_conflict": lambda: PB.MetricFamily("checks_counter", "c", PB.MetricFamily.GAUGE),
            "same_family": lambda: (lambda f: f.Metric(labels={"a": "1"}).value())(
                PB.MetricFamily("checks_counter", "other", PB.MetricFamily.COUNTER)),
            "bad_name": lambda: PB.MetricFamily("bad name", "d", PB.MetricFamily.GAUGE),
            "int_kind": lambda: PB.MetricFamily("x", "d", 0),
            "family_deleted": lambda: PB.MetricFamily("checks_tmp", "t", PB.MetricFamily.GAUGE).Metric().set(1),
        }
        result = {name: attempt(fn) for name, fn in checks.items()}
        text = json.dumps(result, sort_keys=True)
        return [PB.InferenceResponse([PB.Tensor("RESULT", np.array([text], dtype=object))]) for _ in requests]
