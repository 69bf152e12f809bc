class TritonPythonModel:
    def initialize(self, args):
        pass
