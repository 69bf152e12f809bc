"""Package list: tritonhttp and its subpackages, the model-facing
``triton_python_backend_utils``, plus cli/ as tritonhttp_cli."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["tritonhttp", "tritonhttp.*"]),
        "triton_python_backend_utils",
        "tritonhttp_cli",
    ]
)
