"""No config.pbtxt: ``auto_complete_config`` declares the IO, a maximum batch size of 4
and dynamic batching, so ``execute`` may get several requests at once (each with its
own batch dimension)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        for name in ("INPUT0", "INPUT1"):
            auto_complete_model_config.add_input(
                {"name": name, "data_type": "TYPE_FP32", "dims": [4]}
            )
        for name in ("OUTPUT0", "OUTPUT1"):
            auto_complete_model_config.add_output(
                {"name": name, "data_type": "TYPE_FP32", "dims": [4]}
            )
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]
                )
            )
        return responses
