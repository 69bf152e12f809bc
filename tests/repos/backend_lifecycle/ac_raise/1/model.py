class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.set_max_batch_size(-5 if False else 0)
        raise RuntimeError("auto-complete refused")

    def execute(self, requests):
        return []
