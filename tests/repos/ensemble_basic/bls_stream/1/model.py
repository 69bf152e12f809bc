import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Streams from the decoupled ensemble 'ens_stream' over BLS; SEEN lists every OUT."""

    def execute(self, requests):
        out = []
        for r in requests:
            count = pb_utils.get_input_tensor_by_name(r, "COUNT").as_numpy()
            call = pb_utils.InferenceRequest(
                model_name="ens_stream",
                inputs=[pb_utils.Tensor("COUNT", count)],
                requested_output_names=["OUT"],
            )
            seen = []
            for resp in call.exec(decoupled=True):
                if resp.has_error():
                    raise pb_utils.TritonModelException(resp.error().message())
                tensor = pb_utils.get_output_tensor_by_name(resp, "OUT")
                if tensor is not None:
                    seen.extend(tensor.as_numpy().reshape(-1).tolist())
            out.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", np.array(seen, np.int32))])
            )
        return out
