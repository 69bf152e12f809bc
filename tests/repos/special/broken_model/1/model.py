class TritonPythonModel:
    def initialize(self, args):
        raise Exception("intentional init failure")

    def execute(self, requests):
        return []
