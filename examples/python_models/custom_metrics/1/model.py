"""Custom metrics on the server's metrics endpoint: a counter of the time spent in
``execute`` (nanoseconds), a gauge of the last batch size and a histogram of the input
sizes. OUTPUT0 = INPUT0 * 2."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        labels = {"model": args["model_name"], "version": args["model_version"]}
        self.latency_family = pb_utils.MetricFamily(
            name="requests_process_latency_ns",
            description="Cumulative time spent processing requests",
            kind=pb_utils.MetricFamily.COUNTER,
        )
        self.latency = self.latency_family.Metric(labels=labels)
        self.batch_family = pb_utils.MetricFamily(
            name="last_batch_size",
            description="Requests in the last execute call",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        self.batch = self.batch_family.Metric(labels=labels)
        self.size_family = pb_utils.MetricFamily(
            name="input_elements",
            description="Elements per input tensor",
            kind=pb_utils.MetricFamily.HISTOGRAM,
        )
        self.size = self.size_family.Metric(labels=labels, buckets=[1, 4, 16])

    def execute(self, requests):
        start = time.perf_counter_ns()
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            self.size.observe(data.size)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", data * 2)]))
        self.batch.set(len(requests))
        self.latency.increment(time.perf_counter_ns() - start)
        pb_utils.Logger.log_verbose(f"requests_process_latency_ns: {self.latency.value()}")
        return responses
