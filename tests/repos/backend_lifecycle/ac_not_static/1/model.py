class TritonPythonModel:
    def auto_complete_config(self, config):
        return config

    def execute(self, requests):
        return []
