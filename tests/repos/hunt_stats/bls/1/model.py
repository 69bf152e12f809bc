"""BLS caller: MODE picks calls to ``callee`` (the scheduling probe) and ``dec``;
RESULT describes what came back. MODE 13 raises after a successful call."""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def _request(model, value, name="IN", batched=True, **kw):
    data = np.array([[value]] if batched else [value], dtype=np.int32)
    return pb_utils.InferenceRequest(
        model_name=model, inputs=[pb_utils.Tensor(name, data)], requested_output_names=["OUT"], **kw
    )


def _seq(cid, value, flags=0):
    data = np.array([[value]], dtype=np.int32)
    request = pb_utils.InferenceRequest(
        model_name="seq_raise",
        inputs=[pb_utils.Tensor("IN", data)],
        requested_output_names=["OUT"],
        correlation_id=cid,
        flags=flags,
    )
    return _describe(request.exec())


START = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
END = pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END


def _describe(response):
    if response.has_error():
        return "error: " + response.error().message()
    out = pb_utils.get_output_tensor_by_name(response, "OUT")
    return None if out is None else out.as_numpy().reshape(-1).tolist()


def _stream(request):
    return [_describe(r) for r in request.exec(decoupled=True)]


CASES = {
    0: lambda: [_describe(_request("callee", 5).exec())],
    1: lambda: [_describe(_request("callee", -1).exec())],
    2: lambda: [_describe(_request("callee", -2).exec())],
    3: lambda: [_describe(_request("nope", 1).exec())],
    5: lambda: _stream(_request("dec", 3, batched=False)),
    6: lambda: _stream(_request("dec", 0, batched=False)),
    7: lambda: _stream(_request("dec", -1, batched=False)),
    8: lambda: [_describe(_request("dec", 2, batched=False).exec())],
    9: lambda: [_describe(_request("callee", 1, name="NOPE").exec())],
    10: lambda: _stream(_request("dec", -2, batched=False)),
    11: lambda: _stream(_request("dec", -3, batched=False)),
    12: lambda: [_describe(_request("callee", v).exec()) for v in (1, 2, 3)],
    14: lambda: [_describe(_request("dec", 1, batched=False).exec())],
    16: lambda: [_seq(5, 3, START), _seq(5, 4), _seq(5, 1, END)],
    17: lambda: [_seq(6, -1, START), _seq(6, 2), _seq(6, -2, END)],
    18: lambda: [_seq(0, 1)],
    19: lambda: [_seq(7, 1)],
    20: lambda: [_describe(_request("cached", v, batched=False).exec()) for v in (7, 7, 8)],
    21: lambda: [_describe(_request("callee_to", 1, timeout=100000).exec())],
    15: lambda: [_describe(_request("callee", 1, batched=False).exec())],
}


class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            if mode == 4:
                result = [_describe(await _request("callee", 6).async_exec())]
            elif mode == 13:
                _request("callee", 4).exec()
                raise ValueError("caller failure")
            else:
                result = CASES[mode]()
            text = json.dumps(result).encode()
            out.append(
                pb_utils.InferenceResponse(
                    [pb_utils.Tensor("RESULT", np.array([text], dtype=np.object_))]
                )
            )
        return out
