class TritonPythonModel:
    def execute(self, requests):
        raise ValueError("callee failed")
