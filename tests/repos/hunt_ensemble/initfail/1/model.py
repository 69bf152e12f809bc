"""Fails to initialize."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("initfail cannot start")

    def execute(self, requests):
        return []
