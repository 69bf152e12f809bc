"""Helpers every layer of the server may use: they know nothing of HTTP, models or the core.

``_json`` writes JSON as Triton's RapidJSON does (numbers included, ``_grisu_vec`` for
large float arrays), ``_eager`` steps a coroutine by hand until it must wait, and
``_logging`` formats log lines in tritonserver's layout.
"""
