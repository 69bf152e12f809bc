"""Custom metrics: a counter, a gauge and a histogram, each moved by IN on every request."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.counters = counters = pb_utils.MetricFamily("hunt_requests", "Requests seen", pb_utils.MetricFamily.COUNTER)
        self.gauges = gauges = pb_utils.MetricFamily("hunt_last_in", "Last IN", pb_utils.MetricFamily.GAUGE)
        self.hists = hists = pb_utils.MetricFamily("hunt_in_hist", "IN values", pb_utils.MetricFamily.HISTOGRAM)
        labels = {"model": args["model_name"], "kind": "a"}
        self.counter = counters.Metric(labels=labels)
        self.gauge = gauges.Metric(labels=labels)
        self.hist = hists.Metric(labels=labels, buckets=[1.0, 10.0])
        self.bare = counters.Metric()

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            self.counter.increment(1)
            self.gauge.set(float(x[0]))
            self.hist.observe(float(x[0]))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
        return out
