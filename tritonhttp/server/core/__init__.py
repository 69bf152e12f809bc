"""The server core: model repository, configuration, scheduling, shared memory, statistics.

It knows nothing about HTTP. The front end calls it; backends plug in through
:class:`~tritonhttp.server.core._backend_api.Backend`.
"""
