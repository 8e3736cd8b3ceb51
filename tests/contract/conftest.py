"""The end-to-end fixtures of tests/test_cli.py: a scratch cwd, config and cache, and a small matrix."""

from tests.test_cli import matrix, run  # noqa: F401 (fixtures)
