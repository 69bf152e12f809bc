import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.args = args

    def execute(self, requests):
        out = []
        for r in requests:
            info = "%s|%r|%s|%s|%s|%s" % (
                r.request_id(), r.correlation_id(), r.flags(), r.timeout(), r.parameters(),
                ",".join(sorted(r.requested_output_names())),
            )
            keys = ",".join(sorted(self.args))
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("INFO", np.array([info.encode()], dtype=object)),
                pb_utils.Tensor("ARGS", np.array([keys.encode(), self.args["model_instance_name"].encode(),
                                                  self.args["model_instance_kind"].encode(),
                                                  self.args["model_version"].encode()], dtype=object)),
                pb_utils.Tensor("EXTRA", np.array([1], dtype=np.int32)),
            ]))
        return out
