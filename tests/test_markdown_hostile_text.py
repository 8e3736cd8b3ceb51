"""`check --format markdown` is pasted into a GitHub issue or a forum post, so a string from the box (a package's
version from its METADATA, an env value, a collector's error) must show as written there: never a link, an image,
raw HTML, emphasis, or the end of the code span or fence it sits in.

Before: views/markdown.py escaped only `*` and `<`, and only outside what it took for code spans, so one stray
backtick in a version turned escaping off for the rest of the line (`0.11 ` <img src=x> [run](https://...)` rendered
an image and a link); `[click](URL)` and `![i](URL)` rendered anywhere; an env value holding two backticks closed
the inline code it was put in; a snapshot string holding four backticks closed the snapshot's fence.
The real CLI on a snapshot file, as a user runs it on one sent to them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

FACTS = Path(__file__).parent / "data" / "facts" / "gb10-broken.json"
HOSTILE = {
    "torch": "2.9.0 [click](https://github.com/evil/phish) ![i](https://github.com/evil.png) _em_ ~~s~~",
    "vllm": "0.11 ` <img src=x> [run](https://github.com/evil/x) *b*",
}
ENV_VALUE = "x`` [env](https://github.com/evil/env) ``y"
FENCE_BREAKER = "a ```` b\n</details>\n[fence](https://github.com/evil/fence)"


def _markdown(tmp_path: Path) -> str:
    data = json.loads(FACTS.read_text(encoding="utf-8"))
    for name, version in HOSTILE.items():
        data["packages"][name] = {"name": name, "version": version, "location": "/opt/x"}
    data["env"] = {**(data.get("env") or {}), "CUDA_HOME": ENV_VALUE}
    data["host"] = {**(data.get("host") or {}), "kernel": FENCE_BREAKER}
    snapshot = tmp_path / "hostile.json"
    snapshot.write_text(json.dumps(data), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(snapshot), "--format", "markdown"],
                          capture_output=True, text=True, env={**env, "HOME": str(tmp_path)}, timeout=120)
    assert "internal error" not in done.stderr, done.stderr
    return done.stdout


def _outside_code(text: str) -> str:
    """The markdown outside fenced blocks and balanced code spans: what GitHub renders as markdown."""
    text = re.sub(r"(?ms)^(`{3,})json\n.*?^\1$", "", text)
    return re.sub(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", "", text)


def test_box_strings_render_as_written_in_the_markdown_report(tmp_path: Path) -> None:
    rendered = _outside_code(_markdown(tmp_path))
    unescaped = re.compile(r"(?<!\\)(?:\\\\)*(\[|<img|<\/details>\s*\n\s*\[fence)")
    for marker in ("click", "run", "env", "i]"):
        assert not re.search(r"(?<!\\)\[" + re.escape(marker), rendered), marker
    assert not unescaped.search(rendered.replace("<details><summary>", "")), rendered[-2000:]
    assert "_em_" not in rendered and "\\_em\\_" in rendered


def test_the_snapshot_fence_outlasts_any_backtick_run_in_it(tmp_path: Path) -> None:
    text = _markdown(tmp_path)
    opening = re.search(r"(?m)^(`{3,})json$", text)
    assert opening is not None
    fence = opening.group(1)
    assert len(fence) > 4
    body = text[opening.end():]
    assert re.search(rf"(?m)^{fence}$", body)
    assert body.index("a ```` b") < re.search(rf"(?m)^{fence}$", body).start()


HOSTILE_ENTRY = """component = "serving"

[[entry]]
id = "hostile-remedy"
title = "a title"
severity = "error"
action = "fix"
evidence = "reported"
summary = "a summary"
remedy = "Run `pip install x`, then [click](https://github.com/evil/phish) ![i](https://github.com/evil.png) <img src=x>"
when.packages = { "torch" = ">=0" }
refs = ["https://github.com/a/b/issues/1"]
"""


def test_a_matrix_file_s_remedy_is_never_a_link_in_sarif_help_markdown(tmp_path: Path) -> None:
    """GitHub code scanning renders a rule's help.markdown: a --matrix file's remedy shows as written there (its
    code spans kept), as the markdown report shows it."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "m.toml").write_text(HOSTILE_ENTRY, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "SPARKDOCTOR_DEBUG"}
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "check", "--facts", str(FACTS), "--matrix",
                           str(tmp_path / "m"), "--format", "sarif"],
                          capture_output=True, text=True, env={**env, "HOME": str(tmp_path)}, timeout=120)
    sarif = json.loads(done.stdout)
    rules = [r for run in sarif["runs"] for r in run["tool"]["driver"]["rules"] if r["id"] == "hostile-remedy"]
    assert rules, done.stdout[:2000]
    help_md = rules[0]["help"]["markdown"]
    assert "`pip install x`" in help_md and "<https://github.com/a/b/issues/1>" in help_md
    assert "\\[click\\]" in help_md and "\\!\\[i\\]" in help_md and "\\<img" in help_md
    assert not re.search(r"(?<!\\)[\[<]", help_md.replace("<https://github.com/a/b/issues/1>", "")), help_md
