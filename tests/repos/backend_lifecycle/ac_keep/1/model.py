class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]})
        config.set_max_batch_size(4)
        config.set_dynamic_batching()
        d = config.as_dict()
        d["parameters"] = {"p": {"string_value": "from auto-complete"}}  # dropped by Triton
        d["instance_group"] = [{"count": 3, "kind": "KIND_CPU"}]  # dropped too
        return config

    def execute(self, requests):
        return []
