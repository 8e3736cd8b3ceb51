"""A mod that writes a file the interpreter runs at every start (a `.pth` file's `import` lines, `sitecustomize.py`,
`usercustomize.py`) was judged `applies` like any edit, and "no mod breaks the launch", exit 0: what that code does
(to every python of the environment, not only the server) is not what the gate judges. Such a file is now named in
its own verdict's detail and the mod is `cannot-tell`, which `--strict` (and a gate blocking on it) stops on."""

from __future__ import annotations

import json

from tests.mods.test_mods_static import AFTER, BEFORE, make_diff, sd, site, write

PTH = """--- /dev/null
+++ b/evil.pth
@@ -0,0 +1 @@
+import os; os.system("id")
"""
SITECUSTOMIZE = """--- /dev/null
+++ b/sitecustomize.py
@@ -0,0 +1 @@
+import os
"""


def test_a_mod_that_writes_a_startup_file_is_flagged_not_applies(tmp_path):
    tree = site(tmp_path, BEFORE)
    for name, extra, startup in (("pth.patch", PTH, "evil.pth"), ("sc.patch", SITECUSTOMIZE, "sitecustomize.py")):
        mod = write(tmp_path, name, make_diff(BEFORE, AFTER) + extra)
        done = sd("mods", "check", str(mod), "--site", str(tree.dirs[0]), "-f", "json")
        assert done.returncode == 0, done.stderr  # not a failure: nothing here breaks the launch
        (result,) = json.loads(done.stdout)["mods"]
        assert result["verdict"] == "cannot-tell", result
        assert startup in result["detail"] and "every start of the interpreter" in result["detail"], result
        flagged = next(f for f in result["files"] if f["path"] == startup)
        assert "every start of the interpreter" in flagged["detail"], flagged
        strict = sd("mods", "check", str(mod), "--site", str(tree.dirs[0]), "--strict")
        assert strict.returncode == 1 and startup in strict.stdout, strict.stdout + strict.stderr


def test_a_mod_that_edits_ordinary_files_still_applies(tmp_path):
    tree = site(tmp_path, BEFORE)
    mod = write(tmp_path, "good.patch", make_diff(BEFORE, AFTER))
    done = sd("mods", "check", str(mod), "--site", str(tree.dirs[0]), "-f", "json")
    assert json.loads(done.stdout)["mods"][0]["verdict"] == "applies", done.stdout


def test_a_script_that_drops_a_pth_file_is_flagged_too(tmp_path, sandbox_tools):
    """The same through a mod script run in the sandbox: the file it creates is judged like a diff's."""
    from sparkdoctor.mods.judge import judge_mod
    from sparkdoctor.mods.model import Verdict
    from tests.mods.test_mods_scripts import EUGR_SITE, folder

    tree = site(tmp_path, BEFORE)
    mod = folder(tmp_path, f"echo 'import os' > {EUGR_SITE}/zz-hook.pth\n")
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.CANNOT_TELL and "zz-hook.pth" in result.detail, result
    assert any(f.path == "zz-hook.pth" and "every start of the interpreter" in f.detail for f in result.files), result.files
