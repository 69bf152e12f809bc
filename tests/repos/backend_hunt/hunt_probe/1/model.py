"""MODE picks a case; RESULT is a JSON text of what the model saw (compared across servers)."""
import json
import re

import numpy as np
import triton_python_backend_utils as pb_utils


def strings(values):
    return pb_utils.Tensor("IN", np.array(values, dtype=object))


def callee(inputs, outputs=("OUT", "NUM"), **kw):
    return pb_utils.InferenceRequest(model_name="hunt_callee", inputs=inputs,
                                     requested_output_names=list(outputs), **kw)


def dec(n):
    return pb_utils.InferenceRequest(model_name="hunt_dec", requested_output_names=["OUT"],
                                     inputs=[pb_utils.Tensor("IN", np.array([n], np.int32))])


def desc(response):
    if response.has_error():
        return {"error": response.error().message()}
    return {t.name(): t.as_numpy().tolist() if t.as_numpy().dtype != object
            else [x.decode() for x in t.as_numpy().reshape(-1)] for t in response.output_tensors()}


def flags(a):
    return {"writeable": bool(a.flags.writeable), "c": bool(a.flags.c_contiguous),
            "dtype": str(a.dtype), "values": a.tolist()}


def no_address(text):
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


def failure(call):
    try:
        call()
    except Exception as e:
        return {"type": type(e).__name__, "message": no_address(str(e))}
    return "no exception"


def dlpack_copies():
    source = np.arange(3, dtype=np.int32)
    tensor = pb_utils.Tensor("x", source)
    from_capsule = pb_utils.Tensor.from_dlpack("y", tensor.to_dlpack())
    from_tensor = pb_utils.Tensor.from_dlpack("z", tensor)
    seen = {"capsule": flags(from_capsule.as_numpy()), "tensor": flags(from_tensor.as_numpy())}
    from_capsule.as_numpy()[0] = 10
    from_tensor.as_numpy()[1] = 20
    source[2] = 30
    seen["after"] = [source.tolist(), from_capsule.as_numpy().tolist(),
                     from_tensor.as_numpy().tolist()]
    half = pb_utils.Tensor("h", np.array([1.5, 2.5], np.float16))
    seen["fp16"] = flags(pb_utils.Tensor.from_dlpack("h2", half.to_dlpack()).as_numpy())
    return seen


def bls_output_from_dlpack():
    num = callee([strings([b"a"])], outputs=["NUM"]).exec().output_tensors()[0]
    copy = pb_utils.Tensor.from_dlpack("n", num.to_dlpack())
    copy.as_numpy()[0] = 5
    return {"copy": flags(copy.as_numpy()), "original": num.as_numpy().tolist()}


def strided_strings():
    grid = np.array([["a", "b"], ["c", "d"]], dtype=object)
    return flags(pb_utils.Tensor("s", grid[:, 0]).as_numpy())


def duplicate_inputs():
    plain = desc(callee([strings([b"a"]), strings([b"b"])]).exec())
    named = desc(callee([strings([b"a"]), strings([b"b"])], request_id="dup-7").exec())
    return [plain, named]


def bad_constructor_arguments():
    t = strings([b"a"])
    return [
        failure(lambda: callee([t], parameters='{"a": 1}')),
        failure(lambda: callee([t], parameters=[1])),
        failure(lambda: pb_utils.InferenceRequest(model_name="hunt_callee", model_version="1",
                                                  inputs=[t], requested_output_names=["OUT"])),
        failure(lambda: pb_utils.InferenceRequest("id", 0, [t], [1], "hunt_callee")),
    ]


def partly_consumed_iterators():
    it = dec(3).exec(decoupled=True)
    first = next(iter(it))
    rest = [desc(r) for r in it]
    again = [desc(r) for r in it]
    it2 = dec(3).exec(decoupled=True)
    a, b = next(it2), next(it2)
    return {"first": desc(first), "rest": rest, "again": again,
            "next_next_list": [desc(a), desc(b), [desc(r) for r in it2]]}


def shown_as():
    t = strings([b"a"])
    objects = [pb_utils.TritonError("m"), t, pb_utils.InferenceResponse([t]), callee([t])]
    return [[no_address(str(o)), no_address(repr(o))] for o in objects]


def error_only_stream():
    # real Triton 2.51 never returns from this exec (tested on our server only)
    return [desc(r) for r in dec(-1).exec(decoupled=True)]


CASES = [dlpack_copies, bls_output_from_dlpack, strided_strings, duplicate_inputs,
         bad_constructor_arguments, partly_consumed_iterators, shown_as, error_only_stream]


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            value = json.dumps(CASES[mode](), sort_keys=True)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", np.array([value], dtype=object))]))
        return out
