import a_package_nobody_installed  # noqa: F401


class TritonPythonModel:
    def execute(self, requests):
        return []
