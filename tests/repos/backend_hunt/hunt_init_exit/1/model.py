"""initialize calls sys.exit(5)."""
import sys


class TritonPythonModel:
    def initialize(self, args):
        sys.exit(5)

    def execute(self, requests):
        return []
