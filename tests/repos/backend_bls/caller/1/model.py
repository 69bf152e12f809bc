"""BLS with exec(): MODE picks a case of _cases.py; RESULT describes the outcome."""
import triton_python_backend_utils as pb_utils

from . import _cases


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            mode = int(pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0])
            if mode >= 100:
                out.append(_cases.result_tensor(_cases.control(mode)))
                continue
            bls, decoupled = _cases.CASES[mode]()
            if decoupled:
                iterator = bls.exec(decoupled=True)
                first = [_cases.describe(r) for r in iterator]
                again = [_cases.describe(r) for r in iterator]
                value = {"responses": first, "replayed": again == first}
            else:
                value = _cases.describe(bls.exec())
            out.append(_cases.result_tensor(value))
        return out
