"""How long custom series last: a dropped Metric's series stays, the series made through a
deleted MetricFamily handle go (the family stays while another handle holds it)."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        gauge = pb_utils.MetricFamily.GAUGE
        self.family = pb_utils.MetricFamily("mh_life", "lifetime", gauge)
        dropped = self.family.Metric(labels={"a": "dropped"})
        dropped.set(3)
        del dropped
        self.kept = self.family.Metric(labels={"a": "kept"})
        self.kept.set(4)
        again = self.family.Metric(labels={"a": "kept"})
        again.set(5)  # the same series as self.kept
        del again
        other = pb_utils.MetricFamily("mh_life", "second handle", gauge)
        self.via_other = other.Metric(labels={"a": "via_other"})
        self.via_other.set(6)
        del other
        temporary = pb_utils.MetricFamily("mh_life_tmp", "temporary", gauge)
        self.orphan = temporary.Metric(labels={"a": "orphan"})
        self.orphan.set(7)
        del temporary

    def execute(self, requests):
        result = {}
        checks = {
            "kept": lambda: self.kept.value(),
            "via_other": lambda: self.via_other.value(),
            "orphan": lambda: self.orphan.set(1),
            "exec_dropped": lambda: self.family.Metric(labels={"a": "exec"}).set(8),
        }
        for name, check in checks.items():
            try:
                result[name] = {"ok": check()}
            except pb_utils.TritonModelException as e:
                result[name] = {"TritonModelException": str(e)}
        text = json.dumps(result, sort_keys=True)
        out = np.array([text], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)]) for _ in requests]
