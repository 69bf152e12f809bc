class TritonPythonModel:
    """Every execution raises."""

    def execute(self, requests):
        raise RuntimeError("always fails")
