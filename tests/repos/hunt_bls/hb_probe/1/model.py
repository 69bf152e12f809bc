"""MODE picks a group of BLS cases (the arguments of InferenceRequest, exec and
async_exec as pybind11 converts them in Triton's stub); RESULT is a JSON text of what the
model saw: each case's outcome, or the type and text of what it raised."""
import json
import re

import numpy as np
import triton_python_backend_utils as pb_utils


def fix(text):
    return re.sub(r"0x[0-9a-f]+", "0x?", str(text))


def failure(call):
    try:
        value = call()
    except Exception as e:
        return {"type": type(e).__name__, "message": fix(e)}
    return {"value": value}


def i32(values, name="IN"):
    return pb_utils.Tensor(name, np.array(values, np.int32))


def desc(response):
    if response.has_error():
        return {"error": response.error().message()}
    return [[t.name(), t.as_numpy().tolist()] for t in response.output_tensors()]


def build(**kw):
    args = {"model_name": "hb_ident", "inputs": [i32([3])], "requested_output_names": ["OUT"]}
    args.update(kw)
    return pb_utils.InferenceRequest(**args)


def run(**kw):
    return desc(build(**kw).exec())


def ctor_cases():
    return [
        {"model_name": 5}, {"model_name": None}, {"inputs": (i32([3]),)}, {"inputs": i32([3])},
        {"inputs": [np.array([3], np.int32)]}, {"inputs": iter([i32([3])])},
        {"requested_output_names": "OUT"}, {"requested_output_names": ("OUT",)},
        {"requested_output_names": {"OUT"}}, {"requested_output_names": {"OUT": 1}},
        {"requested_output_names": None}, {"requested_output_names": [b"OUT"]},
        {"flags": "1"}, {"flags": -1}, {"flags": 2**32}, {"flags": True}, {"flags": 1.0},
        {"flags": np.int32(0)}, {"timeout": -1}, {"timeout": 1.5}, {"timeout": np.int64(0)},
        {"timeout": 2**64}, {"model_version": "1"}, {"model_version": -2},
        {"model_version": np.int64(1)}, {"model_version": True}, {"model_version": 1.0},
        {"request_id": 5}, {"request_id": None}, {"request_id": b"rid"},
        {"correlation_id": np.int64(5)}, {"correlation_id": b"c"}, {"correlation_id": True},
        {"correlation_id": ""}, {"parameters": '{"a": 1}'}, {"parameters": []},
        {"parameters": {"a": np.int64(1)}}, {"parameters": {"a": b"x"}},
        {"parameters": {"a": True, "b": -(2**63)}}, {"parameters": {"a": 2**64}},
        {"preferred_memory": 5}, {"trace": 5}, {"nope": 1},
    ]


def ctor():
    return [failure(lambda kw=kw: run(**kw)) for kw in ctor_cases()]


def positional():
    T = pb_utils.InferenceRequest
    cases = [lambda: T("hb_ident"), lambda: T(), lambda: T("r", 0, [i32([3])], ["OUT"], "hb_ident"),
             lambda: T("r", 0, [i32([3])], ["OUT"], "hb_ident", 1, 0, 0, None),
             lambda: T(model_name="hb_ident", inputs=[i32([3])])]
    return [failure(lambda c=c: desc(c().exec())) for c in cases]


def exec_args():
    r = build()
    cases = [lambda: desc(r.exec(False)), lambda: desc(r.exec(decoupled=0)),
             lambda: desc(r.exec("yes")), lambda: desc(r.exec(None)),
             lambda: desc(r.exec(decoupled=False, timeout=5)),
             lambda: desc(r.exec(np.bool_(False))), lambda: [desc(x) for x in r.exec(1)],
             lambda: desc(r.exec()), lambda: type(r.async_exec()).__name__]
    return [failure(c) for c in cases]


def echo(**kw):
    return desc(build(model_name="hb_echo", **kw).exec())


def edges():
    import collections
    import decimal
    vals = {
        "correlation_id": [np.int64(5), np.int64(-1), np.uint64(2**64 - 1), np.float32(2),
                           decimal.Decimal(5), True, np.int32(7), 2**64 - 1, np.str_("s"),
                           bytearray(b"b")],
        "flags": [np.float32(1), decimal.Decimal(1), 2**32 - 1, np.bool_(True), np.uint8(3)],
        "timeout": [2**64 - 1, np.float32(3), True],
        "model_version": [2**63, -(2**63), np.int64(-1)],
        "request_id": [bytearray(b"x"), np.str_("n")],
        "requested_output_names": [np.array(["OUT"]), collections.deque(["OUT"]), {"OUT": 1}.keys(),
                                   [np.str_("OUT")], [bytearray(b"OUT")], range(0)],
        "inputs": [collections.deque([i32([3])]), np.array([i32([3])], dtype=object)],
        "model_name": [bytearray(b"hb_echo"), np.str_("hb_echo")],
        "parameters": [{"a": 2**63 - 1}, {"a": 2**63}, {"a": -(2**63) - 1},
                       {"a": np.str_("s")}, {"a": True}, {"a": 0}],
        "preferred_memory": [None], "trace": [None],
    }
    return {k: [failure(lambda k=k, v=v: echo(**{k: v})) for v in vs] for k, vs in vals.items()}


def exec_bools():
    r = build(model_name="hb_echo")
    out = []
    for v in (None, 2, 0.0, 1.5, [], "", np.bool_(False), np.int32(0), np.float64(0)):
        out.append(failure(lambda v=v: type(r.exec(v)).__name__))
        out.append(failure(lambda v=v: type(r.exec(decoupled=v)).__name__))
    return out


def async_args():
    import asyncio
    r = build(model_name="hb_echo")

    async def go(call):
        return type(await call()).__name__

    calls = [lambda: r.async_exec(None), lambda: r.async_exec(decoupled=False, timeout=1),
             lambda: r.async_exec(""), lambda: r.async_exec(2), lambda: r.async_exec(False, 1)]
    return [failure(lambda c=c: asyncio.run(go(c))) for c in calls] + [
        failure(lambda: r.exec(False, 1)), failure(lambda: pb_utils.InferenceRequest.exec(5))]


GROUPS = [ctor, positional, exec_args, edges, exec_bools, async_args]


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            value = failure(GROUPS[mode])
            text = json.dumps(value, sort_keys=True, default=repr)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([text], dtype=object))]))
        return out
