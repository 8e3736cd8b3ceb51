"""The target probe reports the VLLM_*, TRITON_* and CUTE_DSL_* variables it sees, a secret's value redacted by its
name (KEY, TOKEN, ...). A URL with a password in it (`https://user:pass@host/`) under any other name was reported
whole, into check's JSON, a snapshot and a report. Now the password part is redacted, the rest kept. The probe's
own function, run as it runs: the standard library only, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sparkdoctor.locations import data_dir


def test_a_password_inside_a_url_is_redacted_and_the_rest_kept():
    probes = data_dir("probes")
    code = (f"import sys, json; sys.path[:0] = [{str(probes / 'target_env')!r}, {str(probes / 'shared')!r}]; "
            "import targetenv_system; print(json.dumps(targetenv_system.relevant_env()))")
    env = {**os.environ, "VLLM_URL": "https://me:PLANTED-PW-1@host.example/x", "TRITON_X": "s3://k:PLANTED-PW-2@b/",
           "VLLM_PLAIN": "https://host.example/y", "VLLM_API_KEY": "PLANTED-3",
           # a password holding @ or /, a token alone: kept in part or whole by the first pattern
           "VLLM_AT": "https://me:PLANTED@PW-4@host.example/", "VLLM_SLASH": "https://me:PLANTED/PW-5@host.example/",
           "VLLM_REPO_URL": "https://PLANTED-PW-6@github.com/org/repo", "VLLM_PIN": "https://host.example/pkg@1.0",
           "VLLM_USER_AT": "https://me@corp.example:PLANTED-PW-7@host.example/x",
           # pip's VCS form with a ref, a token before a port and a path with @, a comma-joined list
           "VLLM_VCS": "git+https://PLANTED-PW-8@github.com/org/repo.git@v0.9.0",
           "VLLM_PORT": "https://PLANTED-PW-9@host.example:8443/simple/pkg@1.0",
           "VLLM_LIST": "https://h1.example/simple,https://u:PLANTED-PW-10@h2.example/simple"}
    done = subprocess.run([sys.executable, "-S", "-B", "-c", code], env=env, capture_output=True, text=True, timeout=60)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "PLANTED" not in json.dumps(seen), seen
    assert seen["VLLM_URL"] == "https://me:<redacted>@host.example/x" and seen["VLLM_PLAIN"] == "https://host.example/y"
    assert seen["VLLM_API_KEY"] == "<redacted>"
    assert seen["VLLM_AT"] == seen["VLLM_SLASH"] == "https://me:<redacted>@host.example/"
    assert seen["VLLM_REPO_URL"] == "https://<redacted>@github.com/org/repo" and seen["VLLM_PIN"] == "https://host.example/pkg@1.0"
    assert seen["VLLM_USER_AT"] == "https://<redacted>@host.example/x"
    assert seen["VLLM_VCS"] == "git+https://<redacted>@github.com/org/repo.git@v0.9.0"
    assert seen["VLLM_PORT"] == "https://<redacted>@host.example:8443/simple/pkg@1.0"
    assert seen["VLLM_LIST"] == "https://h1.example/simple,https://u:<redacted>@h2.example/simple"


def test_the_redaction_reads_a_long_value_once():
    """The first pattern backtracked over every `://` of a value: 64 KB of "://:" took 7 s of CPU. Bounded in CPU
    seconds, not wall time (a busy machine is no failure)."""
    probes = data_dir("probes")
    code = (f"import sys, resource; sys.path[:0] = [{str(probes / 'target_env')!r}, {str(probes / 'shared')!r}]; "
            "import targetenv_system; before = resource.getrusage(resource.RUSAGE_SELF).ru_utime; "
            "targetenv_system.redact_userinfo('://:' * 32000 + '@'); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime - before)")
    done = subprocess.run([sys.executable, "-S", "-B", "-c", code], capture_output=True, text=True, timeout=120)
    assert float(done.stdout.strip()) < 1.0, done.stdout + done.stderr
