"""BLS with async_exec() from async def execute: the same cases as caller."""
import triton_python_backend_utils as pb_utils

from . import _cases


class TritonPythonModel:
    async def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            bls, decoupled = _cases.CASES[mode]()
            if decoupled:
                iterator = await bls.async_exec(decoupled=True)
                first = [_cases.describe(r) for r in iterator]
                value = {"responses": first, "replayed": [_cases.describe(r) for r in iterator] == first}
            else:
                value = _cases.describe(await bls.async_exec())
            out.append(_cases.result_tensor(value))
        return out
