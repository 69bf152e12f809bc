"""Package list: tritonhttp and its subpackages, plus cli/ as tritonhttp_cli."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["tritonhttp", "tritonhttp.*"]), "tritonhttp_cli"])
