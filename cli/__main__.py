"""``python -m tritonhttp_cli``: the same as the ``triton-cli`` script."""

from .main import main

main()
