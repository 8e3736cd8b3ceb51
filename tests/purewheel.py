"""A minimal pure-Python wheel made in the test, for pip to install from a local folder (no registry)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Mapping
from pathlib import Path

WHEEL = b"Wheel-Version: 1.0\nGenerator: sparkdoctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def pure_wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
               modules: Mapping[str, bytes] | None = None) -> Path:
    """NAME-VERSION as a wheel in `folder`: its `modules` (path in the wheel -> bytes; default a package of the
    name's import form whose __init__ sets VERSION), METADATA with `requires`, WHEEL, and a RECORD of them all."""
    mod, dist = name.replace("-", "_"), f"{name.replace('-', '_')}-{version}"
    files = dict(modules) if modules is not None else {f"{mod}/__init__.py": f"VERSION = {version!r}\n".encode()}
    files[f"{dist}.dist-info/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                           + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    files[f"{dist}.dist-info/WHEEL"] = WHEEL
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}\n"
                     for p, b in files.items()) + f"{dist}.dist-info/RECORD,,\n"
    path = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, b in {**files, f"{dist}.dist-info/RECORD": record.encode()}.items():
            z.writestr(p, b)
    return path
