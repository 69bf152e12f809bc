import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.acc = {}

    def execute(self, requests):
        out = []
        for r in requests:
            cid = r.correlation_id()
            start = pb_utils.get_input_tensor_by_name(r, "START").as_numpy()
            value = pb_utils.get_input_tensor_by_name(r, "INPUT").as_numpy()
            if start.reshape(-1)[0]:
                self.acc[cid] = 0
            self.acc[cid] = self.acc.get(cid, 0) + int(value.reshape(-1)[0])
            end = pb_utils.get_input_tensor_by_name(r, "END").as_numpy().reshape(-1)[0]
            names = ",".join(t.name() for t in r.inputs())
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUTPUT", np.array([self.acc[cid]], dtype=np.int32)),
                pb_utils.Tensor("INFO", np.array([("%s|%s|%s|%s" % (cid, r.flags(), float(end), names)).encode()], dtype=object)),
            ]))
        return out
