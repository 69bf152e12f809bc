import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Calls the ensemble 'ens' for both its outputs (for OUT alone when the request has
    the parameter 'subset')."""

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            call = pb_utils.InferenceRequest(
                model_name="ens",
                inputs=[pb_utils.Tensor("IN", x)],
                requested_output_names=["OUT"] if "subset" in r.parameters() else ["OUT", "MID"],
            )
            resp = call.exec()
            if resp.has_error():
                out.append(
                    pb_utils.InferenceResponse(
                        error=pb_utils.TritonError("BLS: " + resp.error().message())
                    )
                )
                continue
            y = pb_utils.get_output_tensor_by_name(resp, "OUT").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", y.astype(np.float32))]))
        return out
