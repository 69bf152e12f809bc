"""Makes call number IN of ``_calls`` (the response sender and the InferenceResponse and
Tensor constructors given wrong arguments) and answers with what it raised or returned
(``type: message``), then FINAL; a call that sent a response leaves that one (a call that
closed the sender: the text is not sent). IN past the calls: the text ``END``."""

import contextlib

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
ARRAY = np.array([1, 2], dtype=np.int32)


def _calls(sender):
    ok = pb_utils.InferenceResponse([])
    return [
        lambda: sender.send("nope"),
        lambda: sender.send(response="nope"),
        lambda: sender.send(ok, "x"),
        lambda: sender.send(ok, flags=1.5),
        lambda: sender.send(ok, bogus=1),
        lambda: sender.send(ok, 0, 3),
        lambda: sender.send(None, None),
        lambda: sender.send(b"raw", flags=FINAL),
        lambda: sender.send([ok]),
        lambda: pb_utils.InferenceResponse("x"),
        lambda: pb_utils.InferenceResponse([1]),
        lambda: pb_utils.InferenceResponse(output_tensors=[1]),
        lambda: pb_utils.InferenceResponse([], "err"),
        lambda: pb_utils.InferenceResponse(bogus=1),
        lambda: pb_utils.InferenceResponse([], None, None, 4),
        lambda: pb_utils.InferenceResponse(None),
        lambda: pb_utils.InferenceResponse(error="e"),
        lambda: pb_utils.Tensor(1, ARRAY),
        lambda: pb_utils.Tensor("x", [1, 2]),
        lambda: pb_utils.Tensor("x"),
        lambda: pb_utils.Tensor(),
        lambda: pb_utils.Tensor("x", ARRAY, 3),
        lambda: pb_utils.Tensor(name="x", array=ARRAY),
        lambda: pb_utils.Tensor("x", array=ARRAY),
        lambda: pb_utils.Tensor(b"x", ARRAY),
        lambda: pb_utils.Tensor("x", None),
        lambda: pb_utils.Tensor("x", 5),
        lambda: pb_utils.Tensor(b"x", ARRAY).name(),
        lambda: pb_utils.Tensor(bytearray(b"x"), ARRAY).name(),
        lambda: pb_utils.Tensor("x", np.int32(5)),
        lambda: sender.send(ok, -1),
        lambda: sender.send(ok, 2**32),
        lambda: sender.send(ok, np.int64(3)),
        lambda: sender.send(ok, np.float32(1)),
        lambda: sender.send(ok, "1"),
        lambda: sender.send(ok, 3),
        lambda: sender.send(None, 0),
        lambda: sender.send(flags=0),
        lambda: sender.send(),
    ]


def _outcome(call):
    try:
        value = call()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return f"no error: {value!r}"


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            calls = _calls(sender)
            index = int(request.inputs()[0].as_numpy()[0])
            text = _outcome(calls[index]) if index < len(calls) else "END"
            out = pb_utils.Tensor("TEXT", np.array([text], dtype=np.object_))
            with contextlib.suppress(pb_utils.TritonModelException):  # (a call closed it)
                sender.send(pb_utils.InferenceResponse([out]), flags=FINAL)
        return None
