"""tomllib, or tomli where Python is 3.10: the one place every TOML reader takes it from."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["tomllib"]
