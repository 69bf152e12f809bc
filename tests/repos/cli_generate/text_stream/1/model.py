"""Decoupled: sends text_input back one word per response (each word followed by a space,
the last one without), then the final flag. An empty text fails with an error response."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = (
                pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            )
            words = text.split(b" ")
            if text == b"":
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("empty text_input")),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            for i, word in enumerate(words):
                piece = word + (b" " if i < len(words) - 1 else b"")
                out = np.array([piece], dtype=np.object_)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
