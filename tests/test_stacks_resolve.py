"""`matrix verify --stacks`: a known-good stack is installable by pip on linux aarch64, or marked
image_only (and then never resolved). The resolution itself is real pip against the registry (slow)."""

from __future__ import annotations

import textwrap

import pytest

from sparkdoctor import proc
from sparkdoctor.matrix import MatrixError, load
from sparkdoctor.verify.stacks import conflict, dry_run_argv, resolve

STACK = """
[[stack]]
id = "s1"
title = "t"
packages = {{ {packages} }}
refs = ["https://example.org/x"]
{extra}
"""


def stack(tmp_path, packages='"packaging" = "==24.1"', extra=""):
    path = tmp_path / "stacks.toml"
    path.write_text('component = "stacks"\n' + textwrap.dedent(STACK.format(packages=packages, extra=extra)))
    return load(path).stacks[0]


def test_schema_of_python_and_image_only(tmp_path):
    s = stack(tmp_path, extra='python = "3.11"\nimage_only = "nvcr.io/nvidia/vllm:26.05-py3 only"')
    assert (s.python, s.image_only) == ("3.11", "nvcr.io/nvidia/vllm:26.05-py3 only")
    with pytest.raises(MatrixError, match="field 'python' must be a CPython version"):
        stack(tmp_path, extra='python = "py3"')
    with pytest.raises(MatrixError, match="field 'image_only' must say why"):
        stack(tmp_path, extra='image_only = " "')


def test_an_image_only_stack_is_never_resolved(tmp_path, monkeypatch):
    monkeypatch.setattr(proc, "run", lambda *a, **k: pytest.fail("pip ran for an image-only stack"))
    r = resolve(stack(tmp_path, extra='image_only = "the eugr image"'))
    assert r.verdict == "image-only" and "the eugr image" in r.why


def test_the_dry_run_is_for_linux_aarch64_binaries_and_the_stacks_python(tmp_path):
    argv = dry_run_argv(["vllm==0.22.0"], "3.12", tmp_path / "r.json")
    assert argv[argv.index("--python-version") + 1] == "3.12" and "--dry-run" in argv and ":all:" in argv
    assert "manylinux_2_28_aarch64" in argv and "manylinux_2_17_aarch64" in argv and not any("x86_64" in a for a in argv)


def test_the_conflict_is_one_line():
    err = ("ERROR: Cannot install torch==2.13.0 and vllm==0.20.1 because these package versions have conflicting dependencies.\n\n"
           "The conflict is caused by:\n    The user requested torch==2.13.0\n    vllm 0.20.1 depends on torch==2.11.0\n\n"
           "To fix this you could try to:\n")
    result = proc.ProcResult(["pip"], 1, "", err, 1.0)
    assert conflict(result) == "conflict: The user requested torch==2.13.0; vllm 0.20.1 depends on torch==2.11.0"


@pytest.mark.slow
def test_real_pip_resolves_one_stack_and_refuses_another(tmp_path):
    ok = resolve(stack(tmp_path, packages='"packaging" = "==24.1", "platformdirs" = "==4.3.6"'))
    assert ok.verdict == "resolves" and ok.resolved["packaging"] == "24.1", ok.why
    bad = resolve(stack(tmp_path, packages='"packaging" = "==24.1", "pip-audit" = "==2.7.3", "cyclonedx-python-lib" = "==1.0.0"'))
    assert bad.verdict == "contradicted" and "cyclonedx-python-lib" in bad.why, bad.why


PIP_OFFLINE = ("WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection "
               "broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='pypi.org', port=443): Read timed out. (read "
               "timeout=15)\")': /simple/packaging/\n"
               "ERROR: Could not find a version that satisfies the requirement packaging==24.1 (from versions: none)\n"
               "ERROR: No matching distribution found for packaging==24.1\n")


def test_an_index_that_did_not_answer_is_an_error_not_a_contradicted_stack(tmp_path, monkeypatch):
    """pip that reached no index saw no release and says "No matching distribution found" for one that exists: CI saw
    a known-good stack of packaging 24.1 'contradicted' on a read timeout. A real conflict stays contradicted."""
    monkeypatch.setattr(proc, "run", lambda *a, **k: proc.ProcResult(["pip"], 1, "", PIP_OFFLINE, 1.0))
    r = resolve(stack(tmp_path))
    assert r.verdict == "error" and r.why.startswith("the package index did not answer: WARNING: Retrying"), r.why
    conflicted = PIP_OFFLINE + ("ERROR: Cannot install a and b because these package versions have conflicting "
                                "dependencies.\n\nThe conflict is caused by:\n    a 1 depends on c==1\n    b 1 depends on c==2\n\n")
    monkeypatch.setattr(proc, "run", lambda *a, **k: proc.ProcResult(["pip"], 1, "", conflicted, 1.0))
    assert resolve(stack(tmp_path)).verdict == "contradicted"
    # a retry that got through: pip listed what the index has, so the release is missing indeed
    listed = PIP_OFFLINE.replace("(from versions: none)", "(from versions: 23.2, 24.0)")
    monkeypatch.setattr(proc, "run", lambda *a, **k: proc.ProcResult(["pip"], 1, "", listed, 1.0))
    assert resolve(stack(tmp_path)).verdict == "contradicted"


@pytest.mark.slow
def test_real_pip_against_an_index_that_refuses_is_an_error(tmp_path, monkeypatch):
    """Real pip, its index a local port nothing listens on (no network: 127.0.0.1 refuses at once)."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "1")
    r = resolve(stack(tmp_path))
    assert r.verdict == "error" and "the package index did not answer" in r.why, r.why
