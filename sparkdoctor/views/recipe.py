"""`recipe show`'s view: the recipe resolved, as a person reads it (console) or as its JSON document (recipes/show.py).

Every value is shown beside where it came from (the file's defaults, a --set override, a runner's rule), because the
point of showing a recipe is to see what will really run and why.
"""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sparkdoctor.recipes.model import Recipe
from sparkdoctor.recipes.show import document
from sparkdoctor.result import Format
from sparkdoctor.text import shown
from sparkdoctor.views import View

SHOWN = 2000  # characters of one value the console shows
_FORMAT_NAMES = {"sparkdoctor": "sparkdoctor TOML", "eugr-v1": "eugr/spark-vllm-docker v1 YAML",
                 "sparkrun-v2": "sparkrun v2 YAML"}


def render_console(recipe: Recipe, console: Console) -> None:
    def e(text: str) -> str:  # escaped for rich, and cut: laying out megabytes of one value takes rich minutes
        text = str(text)
        return _e(text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text):,} characters; -f json has it whole)")
    console.print(f"[bold]{e(recipe.name)}[/]  {e(_FORMAT_NAMES.get(recipe.format, recipe.format))}, "
                  f"{e(recipe.source_path)}  [dim]fingerprint {recipe.fingerprint()}[/]")
    if recipe.description:
        console.print(f"  {e(recipe.description)}")
    console.print("[bold]command[/]")
    console.print(f"  {e(shlex.join(recipe.argv))}", soft_wrap=True)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    table.add_column("from", style="dim", overflow="fold")
    src = recipe.sources
    from_param = recipe.model is not None and recipe.model == recipe.params.get("model")  # else the command names its own
    table.add_row("model", e(recipe.model or "-"), e(src.get("param:model", "the command") if from_param else "the command"))
    table.add_row("served model name", e(recipe.served_model_name or "-"), e(src.get("param:served_model_name", "the command, else the model")))
    table.add_row("host, port", e(f"{recipe.host or '-'}, {recipe.port or '-'}"),
                  "launcher: 127.0.0.1, a free port")
    table.add_row("readiness", e(recipe.readiness_path), "else /v1/models")
    table.add_row("container", e(recipe.container or "- (runs in the target environment)"), "")
    table.add_row("needs", e(", ".join(recipe.needs) or "-"), "")
    for key, value in recipe.params.items():
        table.add_row(f"param {e(key)}", e(value), e(src.get(f"param:{key}", "")))
    for key, value in recipe.env.items():
        table.add_row(f"env {e(key)}", e(value), e(src.get(f"env:{key}", "")))
    for w in recipe.workarounds:
        kind = "flag" if "flag" in w else "env"
        table.add_row(f"workaround {kind}", e(w[kind]), f"because {e(w['because'])}")
    if recipe.workload:
        table.add_row("workload", e(", ".join(f"{k}={v}" for k, v in recipe.workload.items())), "")
    if "argv" in src:
        table.add_row("command", "generated", e(src["argv"]))
    console.print(table)
    _changes_inside(recipe, console)
    for warning in recipe.warnings:
        console.print(f"[yellow]warning:[/] {e(warning)}")


def _e(text: str) -> str:
    """A recipe's text as written: never markup, and its control characters escaped before rich lays the line out (an
    ESC escaped only afterwards is 4 characters in a column sized for none; rich drops a BEL or CR unseen)."""
    return escape(shown(text))


def _changes_inside(recipe: Recipe, console: Console) -> None:
    """What the recipe changes inside its container (eugr `mods:`, `build_args:`; sparkrun `patches:`) and the
    alternatives it offers (sparkrun `variants:`): none of it is in the command above, all of it decides what runs."""
    e = _e
    x = recipe.extras
    for key, title in (("mods", "mods (applied inside the container before the command)"),
                       ("patches", "patches (applied inside the container before the command)"),
                       ("build_args", "build_args (how the container image is built)")):
        items = x.get(key)
        if items:
            console.print(f"[bold]{title}[/]")
            for item in items if isinstance(items, list) else [items]:
                console.print(f"  {e(str(item))}", soft_wrap=True)
    variants = x.get("variants")
    if isinstance(variants, dict) and variants:
        console.print("[bold]variants[/] (alternatives to the configuration above; none is applied)")
        for name, body in variants.items():
            if isinstance(body, dict):
                desc = body.get("description", "")
                changes = ", ".join(f"{k}={v}" for k, v in body.items() if k != "description")
                console.print(f"  {e(str(name))}: {e(str(desc))}" + (f" [dim]({e(changes)})[/]" if changes else ""), soft_wrap=True)
            else:
                console.print(f"  {e(str(name))}: {e(str(body))}", soft_wrap=True)


VIEW = View(Recipe, {Format.console: lambda result, sink: sink.wide(lambda console: render_console(result.data, console)), Format.json: lambda result, sink: document(result.data)})
