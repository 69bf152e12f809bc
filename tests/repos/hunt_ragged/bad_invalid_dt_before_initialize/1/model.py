class TritonPythonModel:
    def initialize(self, args):
        raise ValueError("initialize refused")

    def execute(self, requests):
        return [None for _ in requests]
