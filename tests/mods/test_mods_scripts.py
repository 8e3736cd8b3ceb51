"""Mod scripts run isolated against a scratch copy: what they change is judged, the target never changes, and a
script that hangs, writes outside its scratch tree, forks, needs the network or imports the serving stack gets
one line and leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from sparkdoctor.mods.trees import SiteTree
from tests.mods.test_mods_static import AFTER, BEFORE, make_diff

EUGR_SITE = "/usr/local/lib/python3.12/dist-packages"  # where eugr's images keep vLLM; the scripts name it


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


@pytest.fixture
def tree(tmp_path) -> SiteTree:
    root = tmp_path / "site"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "toy.py").write_text(BEFORE)
    return SiteTree([root], str(root))


def digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def folder(tmp_path: Path, run_sh: str, **files: str) -> Path:
    mod = tmp_path / "mods" / "fix-toy"
    mod.mkdir(parents=True)
    (mod / "run.sh").write_text("#!/bin/bash\n" + run_sh)
    for name, text in files.items():
        (mod / name.replace("_", ".")).write_text(text)
    return mod


def judge_untouched(path: Path, tree: SiteTree, **kw):
    before = digest(tree.dirs[0])
    result = judge_mod(path, tree, **kw)
    assert digest(tree.dirs[0]) == before, "the target changed"
    return result


def test_a_python_script_that_edits_the_file_by_its_image_path(tmp_path, tree):
    script = tmp_path / "fix_splits.py"
    script.write_text(
        f"p = '{EUGR_SITE}/vllm/toy.py'\n"
        "s = open(p).read()\n"
        "assert 'splits = 4' in s, 'target text not found'\n"
        "open(p, 'w').write(s.replace('splits = 4', 'splits = max(4, n)'))\n")
    result = judge_untouched(script, tree)
    assert result.verdict is Verdict.APPLIES, result
    assert [(f.path, f.detail) for f in result.files] == [("vllm/toy.py", "changed by the script")]


def test_a_guarded_script_on_a_patched_file_has_no_effect(tmp_path, tree):
    (tree.dirs[0] / "vllm" / "toy.py").write_text(AFTER)
    mod = folder(tmp_path, f"set -e\nif grep -q 'max(4, n)' {EUGR_SITE}/vllm/toy.py; then echo already; exit 0; fi\n"
                           f"sed -i 's/splits = 4/splits = max(4, n)/' {EUGR_SITE}/vllm/toy.py\n")
    result = judge_untouched(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT
    assert result.output_tail == ""  # `echo already` is no patch or error line: not published (test_mods_published)


def test_set_e_stops_before_a_still_valid_step(tmp_path, tree):
    """eugr/spark-vllm-docker#344: the first patch of fix-glm-4.7-flash-AWQ no longer applies and `set -e` stops
    run.sh before its second, still-valid step. The folder fails; its first diff is named as the cause."""
    stale = make_diff(BEFORE.replace("    splits = 4", "    splits = 2"), AFTER, prefix="a/" + EUGR_SITE.lstrip("/") + "/")
    mod = folder(tmp_path, "set -e\npatch -p1 -d / < first.patch\necho second-step\n", first_patch=stale)
    result = judge_untouched(mod, tree)
    assert result.verdict is Verdict.FAILS
    assert "second-step" not in result.output_tail
    first = next(f for f in result.files if f.source == "first.patch")
    assert first.verdict is Verdict.FAILS and "`splits = 2` is nowhere in the file" in first.detail


def test_a_hanging_script_is_killed(tmp_path, tree):
    mod = folder(tmp_path, "sleep 600\n")
    result = judge_untouched(mod, tree, timeout=3)
    assert result.verdict is Verdict.FAILS and "\n" not in result.detail
    # the script is named, never the sandbox's programs ("run.sh hung: setpriv timed out after 3.0s" before)
    assert result.detail == "run.sh hung: still running after 3.0s, its time limit (--timeout)", result.detail


def test_a_script_that_writes_outside_its_scratch_tree(tmp_path, tree):
    outside = Path("/etc/sparkdoctor-mods-test-outside")
    mod = folder(tmp_path, f"set -e\necho pwned > {outside}\n")
    result = judge_untouched(mod, tree)
    assert not outside.exists()
    assert result.verdict is Verdict.FAILS and "writes outside" in result.detail


def test_a_script_that_forks_leaves_nothing_behind(tmp_path, tree):
    marker = "3001.25"  # a sleep no other process runs
    mod = folder(tmp_path, f"setsid sleep {marker} &\n(sleep {marker} &)\nnohup sleep {marker} >/dev/null 2>&1 &\nexit 0\n")
    judge_untouched(mod, tree)

    def sleepers() -> list[str]:
        found = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if marker.encode() in cmd:
                    found.append(pid)
        return found

    deadline = time.monotonic() + 120  # generous: the namespace's processes are reaped by the kernel
    while sleepers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sleepers()


def test_a_script_that_needs_the_network_cannot_be_told(tmp_path, tree):
    script = tmp_path / "fetch.py"
    script.write_text("import urllib.request\nurllib.request.urlopen('https://github.com/x.diff', timeout=5)\n")
    result = judge_untouched(script, tree)
    assert result.verdict is Verdict.CANNOT_TELL and "network" in result.detail


def test_a_script_that_imports_the_stack_cannot_be_told(tmp_path, tree):
    script = tmp_path / "needs_torch.py"
    script.write_text("import torch\n")
    result = judge_untouched(script, tree)
    assert result.verdict is Verdict.CANNOT_TELL and "imports torch" in result.detail


def test_without_a_sandbox_a_script_is_never_run(tmp_path, tree, monkeypatch):
    import sparkdoctor.mods.sandbox as sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    flag = tmp_path / "ran"
    script = tmp_path / "s.sh"
    script.write_text(f"touch {flag}\n")
    result = judge_mod(script, tree)
    assert result.verdict is Verdict.CANNOT_TELL and "bubblewrap" in result.detail
    assert not flag.exists()


def test_a_patch_already_applied_still_stops_a_set_e_script(tmp_path, tree):
    """GNU patch run as the scripts run it exits 1 on a change that is already there ("Reversed (or previously
    applied) patch detected"): with `set -e` the launch stops, although the file is as the mod wants it."""
    (tree.dirs[0] / "vllm" / "toy.py").write_text(AFTER)
    mod = folder(tmp_path, "set -e\npatch -p1 -d /usr/local/lib/python3.12/dist-packages < fix.patch\n",
                 fix_patch=make_diff(BEFORE, AFTER))
    result = judge_untouched(mod, tree)
    assert result.verdict is Verdict.FAILS and "applied already" in result.detail
    assert [f.verdict for f in result.files if f.source == "fix.patch"] == [Verdict.ALREADY_APPLIED]


def test_a_script_that_prints_megabyte_lines_is_judged_in_bounded_cpu_time(tmp_path, tree):
    """The verdict reads the whole output (8 MiB kept): a pattern with a leading `\\S+` (the read-only check) and the
    anonymizer took hours of CPU on one long line a script printed. Run through the CLI with its CPU time bounded."""
    import json
    import resource
    import subprocess
    import sys

    lines = "head -c 3000000 /dev/zero | tr '\\0' a; echo\nprintf 'error: '; head -c 3000000 /dev/zero | tr '\\0' b; echo\n"
    mod = folder(tmp_path, lines + f"sed -i 's/splits = 4/splits = 2/' {EUGR_SITE}/vllm/toy.py\n")
    res = subprocess.run([sys.executable, "-m", "sparkdoctor", "mods", "check", str(mod), "--site", str(tree.dirs[0]),
                          "--format", "json"], capture_output=True, text=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (60, 60)))
    assert res.returncode == 0, (res.returncode, res.stderr[-500:])
    mod_doc = json.loads(res.stdout)["mods"][0]
    assert mod_doc["verdict"] == "applies" and len(mod_doc["output_tail"]) <= 300, mod_doc["output_tail"][:400]


def test_names_a_script_makes_are_one_line_of_text(tmp_path, tree):
    """A file the script creates named with a line break, an escape and bytes that are no UTF-8: its verdict's path
    was the name as it is (a forged second line on the console; a lone surrogate JSON readers refuse)."""
    made = "touch $'nl\\napplies  forged.py' $'esc\\e[2J.py' $'bad\\xff.py'"
    mod = folder(tmp_path, f"set -e\ncd {EUGR_SITE}\nsed -i s/4/5/ vllm/toy.py\ncd vllm\n{made}\n")
    result = judge_mod(mod, tree)
    paths = sorted(f.path for f in result.files if f.path != "vllm/toy.py")
    assert paths == ["vllm/bad\\udcff.py", "vllm/esc\\x1b[2J.py", "vllm/nl\\napplies  forged.py"], (result, paths)
    for path in paths:
        assert path.isprintable() and path.encode("utf-8")


@pytest.mark.parametrize("name", ["-x.sh", "-c.py"])
def test_a_script_named_like_an_option_is_run_as_a_file(tmp_path, tree, name):
    """`bash -x.sh` and `python3 -c.py` read the name as options ("bash: -.: invalid option", a SyntaxError): a
    script that applies was judged `fails`."""
    script = tmp_path / name
    if name.endswith(".py"):
        script.write_text(f"import pathlib\np = pathlib.Path('{EUGR_SITE}/vllm/toy.py')\n"
                          "p.write_text(p.read_text().replace('splits = 4', 'splits = 5'))\n")
    else:
        script.write_text(f"sed -i s/4/5/ {EUGR_SITE}/vllm/toy.py\n")
    result = judge_mod(script, tree)
    assert result.verdict is Verdict.APPLIES, result
