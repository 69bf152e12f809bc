"""Identity for every datatype: each optional input IN_<T> present is returned as OUT_<T>.

BF16 has no numpy form inside Triton's Python backend, so it travels through DLPack.
"""
import triton_python_backend_utils as pb_utils

TYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
         "FP16", "FP32", "FP64", "STRING", "BF16"]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for t in TYPES:
                tensor = pb_utils.get_input_tensor_by_name(request, "IN_" + t)
                if tensor is None:
                    continue
                if t == "BF16":
                    outputs.append(pb_utils.Tensor.from_dlpack("OUT_BF16", tensor.to_dlpack()))
                else:
                    outputs.append(pb_utils.Tensor("OUT_" + t, tensor.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
