"""Fixtures of the rerun tests: the real Facts of this interpreter, collected once per session."""

import sys

import pytest


@pytest.fixture(scope="session")
def here_facts():
    from sparkdoctor.check import CheckRequest, collect
    from sparkdoctor.targets.local import resolve_python_target

    return collect(CheckRequest(target=resolve_python_target(sys.executable), kernels=False)).to_dict()
