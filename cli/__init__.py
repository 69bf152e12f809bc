"""triton-cli: the command line for Triton's HTTP/REST protocol.

Installed with ``pip install 'tritonhttp[cli]'`` as the import package ``tritonhttp_cli``
(the source folder is ``cli/``); the ``triton-cli`` script calls :func:`main`.
"""

from .main import cli, main

__all__ = ["cli", "main"]
