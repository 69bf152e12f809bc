"""Logs at every level from initialize, execute and finalize: the lines land in the
server's log, with this file's name and line, following the server's log settings
(verbose lines only with --log-verbose=1). OUTPUT0 echoes INPUT0."""

import triton_python_backend_utils as pb_utils


def log_all(where):
    logger = pb_utils.Logger
    logger.log_info(f"{where}: Info Msg!")
    logger.log_warn(f"{where}: Warning Msg!")
    logger.log_error(f"{where}: Error Msg!")
    logger.log_verbose(f"{where}: Verbose Msg!")
    logger.log(f"{where}: Specific Msg!", logger.INFO)


class TritonPythonModel:
    def initialize(self, args):
        log_all("initialize")

    def execute(self, requests):
        log_all("execute")
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor(
                        "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
                    )
                ]
            )
            for r in requests
        ]

    def finalize(self):
        log_all("finalize")
