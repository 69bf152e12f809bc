"""MODE picks an error: 0-9 an InferenceResponse(error=TritonError(msg, code)) for each
code (plus no code), 20+ raised exceptions (Triton 2.51 has no ``pb_utils.TritonError``
while it imports a model: no module-level use)."""
import triton_python_backend_utils as pb_utils

CODES = ["UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED",
         "ALREADY_EXISTS", "CANCELLED", None]


def raised(mode):
    E = pb_utils.TritonError
    if mode == 20:
        raise pb_utils.TritonModelException("model exception text")
    if mode == 21:
        raise E("raised triton error", E.NOT_FOUND)
    if mode == 22:
        raise ValueError("plain value error")
    if mode == 23:
        return [pb_utils.InferenceResponse(error="a string error")]
    if mode == 24:
        return [pb_utils.InferenceResponse(error=E(""))]
    if mode == 25:
        return [pb_utils.InferenceResponse(error=E("multi\nline \"quoted\""))]
    return None


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            if mode >= 20:
                return raised(mode)
            E, code = pb_utils.TritonError, CODES[mode]
            err = E(f"code {mode}") if code is None else E(f"code {mode}", getattr(E, code))
            out.append(pb_utils.InferenceResponse(error=err))
        return out
