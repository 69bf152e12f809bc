"""Non-decoupled rescheduling: the first pass of each request is rescheduled (None at its
place in the returned list); the second answers add/sub."""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.seen = set()

    def execute(self, requests):
        out = []
        for request in requests:
            key = request.correlation_id()
            if key not in self.seen:
                self.seen.add(key)
                request.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                out.append(None)
                continue
            self.seen.discard(key)
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return out
