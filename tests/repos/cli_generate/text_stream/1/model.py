"""Decoupled: sends text_input back one word per response (each word followed by a space,
the last one without), then the final flag. An empty text fails with an error response.

Optional request parameters (used by the client streaming tests; the default behaviour
does not change): ``delay_ms`` sleeps that long before each word; ``fail_at`` (an int)
sends an error response instead of the word with that index and stops there;
``repeat`` (an int) sends the words that many times (a long stream)."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = (
                pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy().reshape(-1)[0]
            )
            params = json.loads(request.parameters() or "{}")
            delay = float(params.get("delay_ms", 0)) / 1000.0
            fail_at = params.get("fail_at")
            repeat = int(params.get("repeat", 1))
            words = text.split(b" ") * repeat
            if text == b"":
                sender.send(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("empty text_input")),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                continue
            for i, word in enumerate(words):
                if delay:
                    time.sleep(delay)
                if fail_at is not None and i == int(fail_at):
                    sender.send(
                        pb_utils.InferenceResponse(
                            error=pb_utils.TritonError(f"failed at word {i}")
                        )
                    )
                    break
                piece = word + (b" " if i < len(words) - 1 else b"")
                out = np.array([piece], dtype=np.object_)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
