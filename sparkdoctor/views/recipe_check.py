"""The views of `recipe check`: its document (sparkdoctor.conclusions.recipe_check) as console text, JSON, JUnit XML
and SARIF (views/sarif.py).

`--format junit` is one <testsuite name="sparkdoctor recipe check"> a CI system can gate on, shaped like `check
--format junit` (views/junit.py, whose text cleaning it reuses). Each finding is a testcase "<id>: <title>" in class
"sparkdoctor.recipe.<kind>" (env, flag, workaround, matrix, setting): at or above --fail-on a <failure> with the
evidence and the remedy; below it passes and the finding goes to <system-out>; a value that could not be judged
(`unjudged:*`) is <skipped> with what was missing. A recipe with no findings is one passing testcase, so the suite
is never empty.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from rich.console import Console
from rich.text import Text

from sparkdoctor.conclusions.recipe_check import SEVERITY_RANK, RecipeCheck
from sparkdoctor.describe import clip
from sparkdoctor.matrix import load
from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.views import View
from sparkdoctor.views.conclusions import recipe_check
from sparkdoctor.views.junit import FINDING_CHARS, _clean, document
from sparkdoctor.views.sarif import render_recipe_sarif


def _text(f: dict[str, Any]) -> str:
    lines = [f"{f['severity']}: {f['title']}"]
    if f.get("evidence"):
        lines += ["evidence:"] + [f"  - {clip(e)}" for e in f["evidence"]]
    if f.get("remedy"):
        lines.append(f"what to do: {f['remedy']}")
    return "\n".join(lines)


def junit(doc: dict[str, Any]) -> str:
    suite = ET.Element("testsuite", name="sparkdoctor recipe check")
    props = ET.SubElement(suite, "properties")
    recipe, vllm = doc.get("recipe") or {}, doc.get("vllm") or {}
    for name, value in (("recipe", recipe.get("name")), ("recipe.path", recipe.get("path")), ("recipe.format", recipe.get("format")),
                        ("target", doc.get("target")), ("fingerprint", doc.get("fingerprint")), ("vllm", vllm.get("version")),
                        ("fail_on", doc.get("fail_on")), ("failed", str(bool(doc.get("failed"))).lower())):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=_clean(value))
    floor = SEVERITY_RANK[doc.get("fail_on") or "error"]
    for f in doc.get("findings") or []:
        tc = ET.SubElement(suite, "testcase", classname=_clean(f"sparkdoctor.recipe.{f['kind']}"),
                           name=_clean(f"{f['id']}: {f['title']}"), time="0")
        if f["id"].startswith("unjudged:"):
            ET.SubElement(tc, "skipped", message=_clean("could not judge: " + "; ".join(f.get("evidence") or [])))
        elif SEVERITY_RANK[f["severity"]] >= floor:
            ET.SubElement(tc, "failure", message=_clean(f["title"]), type=f["severity"]).text = _clean(_text(f), FINDING_CHARS)
        else:
            ET.SubElement(tc, "system-out").text = _clean(_text(f), FINDING_CHARS)
    if not doc.get("findings"):
        ET.SubElement(suite, "testcase", classname="sparkdoctor.recipe", name=_clean(f"{recipe.get('name')}: no findings"), time="0")
    return document(suite)  # no <error>: `errors` counts 0


def _console(result: Result[RecipeCheck], sink: Sink) -> str:
    found = result.data

    def draw(console: Console) -> None:
        recipe_check(console, found.document, fitted=sink.at_terminal())
        if found.no_vllm and not found.document.get("failed"):  # judged by the matrix only: exit 6, and why
            console.print(Text(f"not a pass: {found.no_vllm}", style="yellow"))
    return sink.wide(draw)


def _sarif(result: Result[RecipeCheck], sink: Sink) -> str:
    return render_recipe_sarif(result.data.document, load(result.data.matrix)) + "\n"


def _json(result: Result[RecipeCheck], sink: Sink) -> dict[str, object]:
    """The document, and why it is no pass where exit 6 says so (a named target without the recipe's vLLM), else null."""
    return {**result.data.document, "no_vllm": result.data.no_vllm}


VIEW = View(RecipeCheck, {Format.console: _console, Format.json: _json,
                          Format.junit: lambda result, sink: junit(result.data.document) + "\n", Format.sarif: _sarif})
