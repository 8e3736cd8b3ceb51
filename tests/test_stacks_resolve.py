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
