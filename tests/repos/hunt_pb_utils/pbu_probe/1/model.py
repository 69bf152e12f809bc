"""MODE picks a case; RESULT is a JSON text of what the model saw (compared across servers)."""
import json
import os
import re
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


AT_IMPORT = sorted(n for n in dir(pb_utils) if not n.startswith("_"))


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


def req(model, inputs=None, outputs=("OUT",), **kw):
    if inputs is None:
        inputs = [i32([3])]
    return pb_utils.InferenceRequest(model_name=model, inputs=inputs,
                                     requested_output_names=list(outputs), **kw)


def desc(response):
    if response.has_error():  # (not its code: Triton 2.51 makes every code INTERNAL)
        return {"error": response.error().message()}
    return [[t.name(), t.as_numpy().tolist()] for t in response.output_tensors()]


def tdesc(t):
    a = t.as_numpy()
    return {"name": t.name(), "shape": list(t.shape()), "dtype": str(a.dtype), "ndim": a.ndim,
            "writeable": bool(a.flags.writeable), "c": bool(a.flags.c_contiguous),
            "values": [fix(v) for v in a.reshape(-1).tolist()], "cpu": t.is_cpu()}


def public(obj):
    return sorted(n for n in dir(obj) if not n.startswith("_"))


# ---------------------------------------------------------------- BLS
def bls_versions():
    return [failure(lambda v=v: desc(req("pbu_ident", model_version=v).exec())) for v in (-1, 1, 2, 0)]


def bls_output_order():
    return [desc(req("pbu_ident", outputs=o).exec()) for o in (("OUT", "OUT2"), ("OUT2", "OUT"), (), ("OUT2",))]


def bls_missing_output():
    ok = req("pbu_ident").exec()
    bad = req("nope").exec()
    return {"missing": str(pb_utils.get_output_tensor_by_name(ok, "NOPE")),
            "unrequested": str(pb_utils.get_output_tensor_by_name(ok, "OUT2")),
            "bad_outputs": len(bad.output_tensors()),
            "bad_get": str(pb_utils.get_output_tensor_by_name(bad, "OUT")),
            "ok_error": str(ok.error())}


def bls_errors():
    err_in = lambda m: [i32([m], "MODE")]  # noqa: E731
    cases = [req("nope"), req("pbu_ident", [i32([1], "X")]),
             req("pbu_ident", [pb_utils.Tensor("IN", np.array([1.0], np.float32))]),
             req("pbu_ident", [pb_utils.Tensor("IN", np.array([[1]], np.int32))]),
             req("pbu_err", err_in(2), ("RESULT",)), req("pbu_err", err_in(8), ("RESULT",)),
             req("pbu_err", err_in(20), ("RESULT",)), req("pbu_err", err_in(21), ("RESULT",)),
             req("pbu_err", err_in(22), ("RESULT",)), req("pbu_ident", outputs=("NOPE",)),
             req("pbu_ens", [i32([1], "X")], ("E_OUT",)), req("pbu_ident", model_version=3),
             req("pbu_dec")]
    return [desc(c.exec()) for c in cases]


def bls_ensemble():
    return [desc(req("pbu_ens", [i32([4, 5], "E_IN")], o).exec())
            for o in (("E_OUT", "E_OUT2"), ("E_OUT2",), ())]


def bls_decoupled():
    return [[desc(r) for r in req("pbu_dec", [i32([n])]).exec(decoupled=True)] for n in (2, 0)]  # (-1: Triton never returns)


def bls_timeout():
    first = {}
    t = threading.Thread(target=lambda: first.update(r=desc(req("pbu_slow", [i32([600])]).exec())))
    t.start()
    time.sleep(0.2)
    second = desc(req("pbu_slow", [i32([0])], timeout=1000).exec())
    t.join()
    return {"first": first["r"], "second": second}


def bls_params():
    cases = [{"f": 1.5}, {"n": None}, {"d": {"x": 1}}, {1: "a"}, {"big": 2**40}, {"neg": -3}, {}]
    return [failure(lambda p=p: desc(req("pbu_ident", parameters=p).exec())) for p in cases]


def bls_preferred_memory():
    pm = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0)
    P, cpu = pb_utils.PreferredMemory, pb_utils.TRITONSERVER_MEMORY_CPU
    bad = [failure(lambda c=c: type(c()).__name__) for c in (
        lambda: P(), lambda: P("cpu"), lambda: P(cpu, "0"), lambda: P(cpu, 0, 1),
        lambda: P(preferred_device_id=1), lambda: P(cpu, device=0), lambda: P(None))]
    return {"ok": desc(req("pbu_ident", preferred_memory=pm).exec()), "attrs": public(pm),
            "bad": bad}


def bls_corr_kinds():
    built = [failure(lambda c=c: type(req("pbu_ident", correlation_id=c)).__name__) for c in (-1, 2**64, 1.5)]
    return built + [failure(lambda c=c: desc(req("pbu_ident", correlation_id=c).exec()))
            for c in (0, 2**63, -1, "", "abc")]


async def _async_cases():
    a = desc(await req("pbu_ident").async_exec())
    b = [desc(r) for r in await req("pbu_dec", [i32([2])]).async_exec(decoupled=True)]
    c = desc(await req("nope").async_exec())
    return [a, b, c]


def bls_async():
    import asyncio
    return asyncio.run(_async_cases())


# ---------------------------------------------------------------- Tensor
DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.object_, np.bytes_, np.str_]


def tensor_dtypes():
    out = {}
    for dt in DTYPES:
        vals = [b"a", b"bc"] if dt in (np.object_, np.bytes_) else ["a", "bc"] if dt is np.str_ else [1, 0]
        out[np.dtype(dt).name] = failure(lambda v=vals, d=dt: tdesc(pb_utils.Tensor("t", np.array(v, dtype=d))))
    out["object_str"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array(["x", "y"], dtype=object))))
    out["object_int"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array([1, 2], dtype=object))))
    out["object_mixed"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array([b"x", "y"], dtype=object))))
    out["complex"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array([1j]))))
    out["datetime"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array(["2020-01-01"], dtype="datetime64[D]"))))
    out["void"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.zeros(2, dtype="V4"))))
    out["be_int"] = failure(lambda: tdesc(pb_utils.Tensor("t", np.array([1, 2], dtype=">i4"))))
    return out


def tensor_shapes():
    grid = np.arange(12, dtype=np.int32).reshape(3, 4)
    return {"zero_d": failure(lambda: tdesc(pb_utils.Tensor("t", np.array(5, np.int32)))),
            "zero_d_obj": failure(lambda: tdesc(pb_utils.Tensor("t", np.array(b"x", dtype=object)))),
            "strided": failure(lambda: tdesc(pb_utils.Tensor("t", grid[:, 1]))),
            "fortran": failure(lambda: tdesc(pb_utils.Tensor("t", np.asfortranarray(grid)))),
            "transposed": failure(lambda: tdesc(pb_utils.Tensor("t", grid.T))),
            "empty": failure(lambda: tdesc(pb_utils.Tensor("t", np.zeros((0, 3), np.float32)))),
            "empty_obj": failure(lambda: tdesc(pb_utils.Tensor("t", np.zeros((2, 0), dtype=object)))),
            "readonly": failure(lambda: tdesc(pb_utils.Tensor("t", np.frombuffer(b"\x01\x00\x00\x00", np.int32)))),
            "scalar_slice": failure(lambda: tdesc(pb_utils.Tensor("t", grid[1:2, 2:3])))}


def tensor_aliasing():
    src = np.arange(3, dtype=np.int32)
    t = pb_utils.Tensor("t", src)
    src[0] = 7
    a = t.as_numpy()
    a[1] = 8
    objs = np.array([b"a"], dtype=object)
    to = pb_utils.Tensor("o", objs)
    objs[0] = b"z"
    return {"sees_source": t.as_numpy().tolist(), "src": src.tolist(), "same": a is t.as_numpy(),
            "obj": [x.decode() if isinstance(x, bytes) else x for x in to.as_numpy().tolist()],
            "obj_w": bool(to.as_numpy().flags.writeable)}


def tensor_dlpack():
    out = {}
    for dt in (np.bool_, np.int8, np.uint64, np.float16, np.float64):
        t = pb_utils.Tensor("t", np.array([1, 0], dt))
        out[np.dtype(dt).name] = failure(lambda t=t: tdesc(pb_utils.Tensor.from_dlpack("u", t.to_dlpack())))
    out["object"] = failure(lambda: pb_utils.Tensor("t", np.array([b"a"], dtype=object)).to_dlpack())
    return out


def _i32(n):
    return np.arange(n, dtype=np.int32)


# one case a mode (after the others): a case that kills Triton's stub spoils only itself
# (Tensor.from_dlpack of a numpy array does: not probed)
def _src():
    return pb_utils.Tensor("s", _i32(2))



DLPACK = {
    "zero_d": lambda: tdesc(pb_utils.Tensor.from_dlpack("u", pb_utils.Tensor("t", np.array(3, np.int32)).to_dlpack())),
    "to_numpy": lambda: np.from_dlpack(pb_utils.Tensor("t", _i32(3))).tolist(),
    "dunder": lambda: [str(x) for x in pb_utils.Tensor("t", _i32(3)).__dlpack_device__()],
    "empty_name": lambda: pb_utils.Tensor.from_dlpack("", _src()).name(),
    "ctor_empty_name": lambda: pb_utils.Tensor("", _i32(2)).name(),
    "int_name": lambda: pb_utils.Tensor.from_dlpack(3, _src()).name(),
    "none_name": lambda: pb_utils.Tensor.from_dlpack(None, _src()).name(),
    "bytes_name": lambda: pb_utils.Tensor.from_dlpack(b"n", _src()).name(),
    "not_dlpack": lambda: pb_utils.Tensor.from_dlpack("u", [1, 2]),
    "strided": lambda: tdesc(pb_utils.Tensor.from_dlpack("u", pb_utils.Tensor("t", _i32(6)[::2]))),
}


def type_helpers():
    names = ["TYPE_BOOL", "TYPE_UINT8", "TYPE_INT64", "TYPE_FP16", "TYPE_FP64", "TYPE_STRING",
             "TYPE_BF16", "BYTES", "INT32", "TYPE_INVALID", "", "type_int32"]
    np_types = [np.bool_, np.int8, np.uint64, np.float16, np.float64, np.object_, np.bytes_,
                np.str_, np.complex64, np.dtype("int32"), np.dtype("S3"), np.dtype("U2"), float, int, bool, str, bytes, "int32"]
    return {"s2n": [failure(lambda n=n: tname(pb_utils.triton_string_to_numpy(n))) for n in names],
            "n2t": [failure(lambda t=t: pb_utils.numpy_to_triton_type(t)) for t in np_types],
            "t2n": [failure(lambda i=i: tname(pb_utils.triton_to_numpy_type(i))) for i in range(-1, 16)],
            "table": sorted((k, tname(v)) for k, v in pb_utils.TRITON_STRING_TO_NUMPY.items())}


def tname(t):
    # numpy 1 and 2 spell np.bool_ differently: the module and dtype name say the same
    return "None" if t is None else f"{t.__module__}.{np.dtype(t).name}"


def serialize_helpers():
    return {"ser": failure(lambda: pb_utils.serialize_byte_tensor(np.array([b"ab", "c", 1], dtype=object)).tolist()),
            "ser_empty": failure(lambda: str(pb_utils.serialize_byte_tensor(np.array([], dtype=object)))),
            "ser_str": failure(lambda: pb_utils.serialize_byte_tensor(np.array(["ab"])).tolist()),
            "de": failure(lambda: [x.decode() for x in pb_utils.deserialize_bytes_tensor(b"\x02\x00\x00\x00ab").tolist()]),
            "de_bad": failure(lambda: pb_utils.deserialize_bytes_tensor(b"\x09\x00\x00\x00ab").tolist())}


# ---------------------------------------------------------------- request and model
def request_fields(r, model):
    return {"id": r.request_id(), "params": r.parameters(), "corr": r.correlation_id(),
            "flags": r.flags(), "requested": r.requested_output_names(),
            "timeout": failure(r.timeout), "cancelled": r.is_cancelled(),
            "sender": failure(lambda: type(r.get_response_sender()).__name__),
            "trace": failure(lambda: type(r.trace()).__name__),
            "attrs": public(r)}


def init_args(r, model):
    return model.seen


def import_time_names(r, model):
    return AT_IMPORT


def config_helpers(r, model):
    cfg = model.cfg
    return {"in": pb_utils.get_input_config_by_name(cfg, "MODE"),
            "out": pb_utils.get_output_config_by_name(cfg, "RESULT"),
            "in_missing": pb_utils.get_input_config_by_name(cfg, "NOPE"),
            "out_missing": pb_utils.get_output_config_by_name(cfg, "NOPE"),
            "decoupled": pb_utils.using_decoupled_model_transaction_policy(cfg),
            "keys": sorted(cfg)}


def api_surface(r, model):
    t = pb_utils.Tensor("t", np.arange(2))
    return {"module": public(pb_utils), "tensor": public(t), "request": public(req("x")),
            "error": public(pb_utils.TritonError("m")),
            "exception": public(pb_utils.TritonModelException("m")),
            "codes": {k: getattr(pb_utils.TritonError, k) for k in public(pb_utils.TritonError) if k.isupper()},
            "consts": {k: getattr(pb_utils, k) for k in public(pb_utils) if k.startswith("TRITONSERVER")}}


def errors_local(r, model):
    E = pb_utils.TritonError
    return {"default": [E("m").code(), E("m").message()],
            "int_code": failure(lambda: E("m", 3).code()),
            "bad_code": failure(lambda: E("m", 99).code()),
            "str_code": failure(lambda: E("m", "x").code()),
            "exc": failure(lambda: pb_utils.TritonModelException("m").message()),
            "exc_args": list(pb_utils.TritonModelException("m", 1).args),
            "exc_mro": [c.__name__ for c in pb_utils.TritonModelException.__mro__],
            "resp_error": failure(lambda: pb_utils.InferenceResponse(error=E("m", E.NOT_FOUND)).error().code()),
            "resp_noerr": str(pb_utils.InferenceResponse([]).error()),
            "resp_has": pb_utils.InferenceResponse([]).has_error()}


PLAIN = [bls_versions, bls_output_order, bls_missing_output, bls_errors, bls_ensemble,
         bls_decoupled, bls_timeout, bls_params, bls_preferred_memory, bls_corr_kinds, bls_async,
         tensor_dtypes, tensor_shapes, tensor_aliasing, tensor_dlpack, type_helpers,
         serialize_helpers]
WITH_REQUEST = [request_fields, init_args, config_helpers, api_surface, errors_local,
                import_time_names]


class TritonPythonModel:
    def initialize(self, args):
        self.cfg = json.loads(args["model_config"])
        self.seen = {k: (fix(v) if k != "model_config" else "...") for k, v in sorted(args.items())}
        self.seen["model_dir"] = pb_utils.get_model_dir() == os.path.join(args["model_repository"], args["model_version"]) if hasattr(pb_utils, "get_model_dir") else "absent"

    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            if mode < len(PLAIN):
                value = failure(PLAIN[mode])
            elif mode >= len(PLAIN) + len(WITH_REQUEST):
                value = failure(list(DLPACK.values())[mode - len(PLAIN) - len(WITH_REQUEST)])
            else:
                value = failure(lambda: WITH_REQUEST[mode - len(PLAIN)](r, self))
            text = json.dumps(value, sort_keys=True, default=str)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([text], dtype=object))]))
        return out
