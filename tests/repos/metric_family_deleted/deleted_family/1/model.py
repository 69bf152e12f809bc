"""Uses a metric whose MetricFamily is gone, with each operation; RESULT: what each raised."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def deleted_family_metric(op):
    kind = pb_utils.MetricFamily.HISTOGRAM if op == "observe" else pb_utils.MetricFamily.GAUGE
    family = pb_utils.MetricFamily("probe_" + op, "p", kind)
    metric = family.Metric(buckets=[1.0]) if op == "observe" else family.Metric()
    del family
    return metric


def run(op):
    if op == "set_temporary":
        pb_utils.MetricFamily("probe_tmp", "t", pb_utils.MetricFamily.GAUGE).Metric().set(1)
        return
    metric = deleted_family_metric(op)
    if op == "increment":
        metric.increment(1)
    elif op == "set":
        metric.set(1)
    elif op == "observe":
        metric.observe(1)
    else:
        metric.value()


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            ops = pb_utils.get_input_tensor_by_name(r, "OP").as_numpy()[0].decode().split(",")
            seen = {}
            for op in ops:
                try:
                    run(op)
                    seen[op] = "ok"
                except Exception as e:
                    seen[op] = type(e).__name__ + ": " + str(e)
            text = json.dumps(seen, sort_keys=True)
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("RESULT", np.array([text], dtype=object))]
                )
            )
        return out
