"""Third-party code never sees a secret of the user's environment: the target's nvidia-cutlass-dsl, imported by the
CuTe DSL compile probe (probes/cutedsl/) in `check` and in `whatif --probe` / `track`'s throwaway venv, runs with an
allowlisted environment (targets.early.third_party_env), never os.environ whole.

Real: a venv made with `python3 -m venv` whose stand-in nvidia-cutlass-dsl writes its process's environment to a file
when the probe imports `cutlass.cute`; `sparkdoctor check --python` runs as a user would, tokens in its environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_cutedsl_probe import fake_venv

SECRETS = {"HF_TOKEN": "secret-xyz", "GITHUB_TOKEN": "ghp_secret", "AWS_SECRET_ACCESS_KEY": "aws-secret",
           "OPENAI_API_KEY": "sk-secret", "SSH_AUTH_SOCK": "/tmp/agent.sock"}
# `import cutlass.cute` (what the probe's compile imports) writes the importing process's environment to a file
DUMP_CUTE = """\
import json as _json, os as _os
with open(_os.environ.get("CUDA_ENV_DUMP") or "/nonexistent/env.json", "w") as _fh:
    _json.dump(dict(_os.environ), _fh)
"""


def test_check_gives_the_cutedsl_probe_no_token(tmp_path):
    python = fake_venv(tmp_path / "t", DUMP_CUTE)
    dump = tmp_path / "env.json"
    env = {**os.environ, **SECRETS, "CUDA_ENV_DUMP": str(dump), "LC_ALL": "C.UTF-8", "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--python", str(python), "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert dump.exists(), f"the stand-in DSL was never imported: {done.returncode} {done.stderr[-2000:]}"
    seen = json.loads(dump.read_text())
    assert not set(SECRETS) & set(seen), sorted(seen)
    assert not any("secret" in v for v in seen.values())
    # what the compile needs still reaches it: the path, the locale, the CUDA variables
    assert seen["PATH"] == env["PATH"] and seen["LC_ALL"] == "C.UTF-8" and seen["CUDA_ENV_DUMP"] == str(dump)


def wheel(folder: Path, name: str, files: dict[str, bytes]) -> None:
    """A real wheel of `name` 9.9 holding `files` (paths in site-packages)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name.replace('-', '_')}-9.9.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 9.9\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    digest = {p: base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode() for p, d in files.items()}
    record = "".join(f"{p},sha256={digest[p]},{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{name.replace('-', '_')}-9.9-py3-none-any.whl", "w") as zf:
        for path, data in {**files, f"{info}/RECORD": record.encode()}.items():
            zf.writestr(path, data)


def test_whatif_and_track_probe_venv_gives_the_dsl_no_token(tmp_path, monkeypatch):
    """whatif --probe and track's release probe (both whatif.probe.probe_cutedsl): the stand-in wheels installed by uv
    into the throwaway venv from a local folder (the UV_* settings reach the installer), the DSL imported there."""
    from types import SimpleNamespace

    from sparkdoctor.whatif.probe import probe_cutedsl
    from tests.test_cutedsl_probe import fake_cutlass

    site = fake_cutlass(tmp_path / "stage", DUMP_CUTE, version="9.9")
    pkgs = {str(p.relative_to(site)): p.read_bytes() for p in sorted((site / "nvidia_cutlass_dsl").rglob("*")) if p.is_file()}
    links = tmp_path / "links"
    links.mkdir()
    wheel(links, "nvidia-cutlass-dsl", {"nvidia_cutlass_dsl.pth": b"nvidia_cutlass_dsl/python_packages\n"})
    wheel(links, "nvidia-cutlass-dsl-libs-base", pkgs)
    dump = tmp_path / "env.json"
    for name, value in {**SECRETS, "CUDA_ENV_DUMP": str(dump), "UV_OFFLINE": "1", "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(links),
                        "UV_CACHE_DIR": str(tmp_path / "uv-cache")}.items():
        monkeypatch.setenv(name, value)
    facts = SimpleNamespace(packages={"nvidia-cutlass-dsl": {"version": "9.9"}, "nvidia-cutlass-dsl-libs-base": {"version": "9.9"}},
                            cutedsl={"active_build": "libs-base"})
    run = probe_cutedsl(facts, "sm_121a")
    assert dump.exists(), run.to_json()
    seen = json.loads(dump.read_text())
    assert not set(SECRETS) & set(seen), sorted(seen)
    assert not any("secret" in v for v in seen.values())
    assert not any(k.startswith("UV_") for k in seen)  # the installer's settings are the installer's only
