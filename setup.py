"""The one packaging decision pyproject.toml cannot express: the repository's ``suites/`` folder is
installed as the package ``flipgate_suites``, beside ``flipgate``, so the suites ship with the
library and a project of its own collects them with ``pytest --pyargs flipgate_suites``."""

from setuptools import find_namespace_packages, setup

SUITES = "flipgate_suites"

setup(
    packages=find_namespace_packages(include=["flipgate", "flipgate.*"], exclude=["*.__pycache__"])
    + [SUITES]
    + [f"{SUITES}.{name}" for name in find_namespace_packages("suites", exclude=["*__pycache__"])],
    package_dir={SUITES: "suites"},
)
