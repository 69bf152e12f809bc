class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("broken on purpose")
