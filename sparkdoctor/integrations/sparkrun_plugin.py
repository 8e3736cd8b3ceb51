"""The sparkrun plugin (entry point `sparkdoctor` in group `sparkrun.plugins`, installed with
`pip install './[sparkrun]'` from a checkout): before sparkrun launches a recipe that carries a top-level
`sparkdoctor:` item, sparkdoctor's gates (preflight) judge the recipe as sparkrun resolved it, and a failing gate
refuses the launch with sparkdoctor's one-line reasons.

Written against sparkrun 0.4.2 (docs/sparkrun.md cites the lines): sparkrun's loader
(core/installed_plugins.py load_installed_plugins -> core/registration.py load_and_register_plugin) imports this
module, checks SPARKRUN_PLUGIN_API_VERSION and calls register(v); register claims the recipe item `sparkdoctor`
(core/recipe_items.py register_recipe_item) with one preparation step; sparkrun's run (api/_run.py) runs the
preparation steps of the items a recipe has before any image is pulled or a serving workload replaced, and an
exception there ends the launch as "launch preparation failed: <message>".

sparkrun is imported inside register() and the step only: importing this module, or sparkdoctor, never imports it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from sparkdoctor.integrations.preflight import (
    Settings,
    SettingsError,
    Verdict,
    allowed_by_env,
    judge,
)
from sparkdoctor.recipes.model import Recipe
from sparkdoctor.text import one_line

SPARKRUN_PLUGIN_API_VERSION = 1  # core/registration.py PLUGIN_API_VERSION at sparkrun 0.4.2
ITEM = "sparkdoctor"
STEP = "sparkdoctor.preflight"
# sparkrun 0.4.2 core/launcher.py line 1475: `config_chain.get("port") or 8000`
SPARKRUN_PORT = 8000
# Keys the exported recipe keeps out of `recipe check`: this item, and the mods (judged by `mods check`, against
# the same target, so that one failing mod is one reason).
NOT_FOR_RECIPE_CHECK = (ITEM, "mods")
OFF = False  # `sparkdoctor: false`: the recipe turns the gate off (the launch goes on, one line says so)
# Seconds (at most the item's timeout) for sparkrun's is_local_host over the plan's hosts: it looks their names up, and
# a name whose lookup never answers held the launch for good. Past it the memory is not judged, as for a remote host.
HOSTS_TIMEOUT = 10.0


class LaunchRefused(RuntimeError):
    """A gate failed: sparkrun prints "launch preparation failed: " + this one line and launches nothing."""


def parse_item(value: object, recipe: Recipe) -> dict[str, object] | bool:
    """The item as the recipe writes it, checked (a malformed item is a recipe error, one line); `false` (the user
    turning the gate off for this recipe) is kept as False: the step then says so and judges nothing."""

    return OFF if value is OFF else Settings.parse(value).to_dict()


def validate_item(value: object, recipe: Recipe) -> list[str]:
    try:
        parse_item(value, recipe)
    except SettingsError as exc:
        return [str(exc)]
    return []


def export_item(value: object, recipe: Recipe) -> object:
    """As sparkrun writes the item back: `true` for the defaults, `false` kept (not turned back on)."""
    return value if value is OFF else (value or True)


def register(v: object) -> None:
    """Called by sparkrun's loader: claim the `sparkdoctor` recipe item and its preparation step."""
    # sparkrun is the host here (the optional extra [sparkrun]): imported only when it calls us
    from sparkrun.core.recipe_items import (
        FunctionalRecipeItemHandler,
        register_recipe_item,
    )

    register_recipe_item(ITEM, FunctionalRecipeItemHandler(parse_item, validate_item, export_item),
                         owner="sparkdoctor", preparation_steps=preparation_steps)


def preparation_steps(context: object) -> tuple[object, ...]:
    from sparkrun.core.execution import (
        PreparationStep,  # the optional extra [sparkrun], present when it calls us
    )

    return (PreparationStep(STEP, preflight),)


def preflight(context: Any, _receipts: object) -> dict[str, object]:
    """The preparation step: judge the recipe sparkrun is about to launch; raise LaunchRefused to stop it."""

    recipe = context.plan.recipe
    item = recipe.plugin_items.get(ITEM)
    if item is OFF:
        say(f"sparkdoctor: gate turned off by the recipe {recipe.name} (sparkdoctor: false): nothing judged")
        return {"reasons": [], "gates": [], "allowed": False, "off": True}
    settings = Settings.parse(item)
    mods, unresolved = resolve_mods(recipe)
    image = str(recipe.container or "") or None
    model, why_not = memory_model(recipe, getattr(context.plan, "host_list", None), min(settings.timeout, HOSTS_TIMEOUT))
    say(f"sparkdoctor: judging {recipe.name} before launch (recipe check{', memory' if model else ''}"
        f"{', mods check' if mods else ''}; "
        f"target: {settings.python or (f'image {image}' if image else 'as recipe check chooses')})")
    if why_not:
        say(f"sparkdoctor: memory not judged: {why_not}")
    for ref in unresolved:
        say(f"sparkdoctor: mod {ref} is not beside the recipe (a registry mod sparkrun fetches later): not judged")
    try:
        with tempfile.TemporaryDirectory(prefix="sparkdoctor-sparkrun-") as folder:
            exported = export_recipe(recipe, getattr(context.options, "overrides", None), Path(folder))
            verdict = judge(str(exported), mods, image, settings, model=model)
    except Exception as exc:  # the step's own failure (a value YAML cannot hold, a full disk): no gate ran, no pass
        verdict = Verdict([f"the gate could not run: cannot write the recipe as sparkrun resolved it under "
                           f"{tempfile.gettempdir()}: {one_line(str(exc) or type(exc).__name__)[:300]}"],
                          allowed=settings.allow or allowed_by_env(os.environ))
        exported = None
    shown = f"{getattr(recipe, 'source_path', None) or recipe.name} (as sparkrun resolved it)"
    verdict.reasons = [r.replace(str(exported), shown) if exported else r for r in verdict.reasons]  # the copy is gone
    if verdict.refused:
        raise LaunchRefused(verdict.message())
    for reason in verdict.reasons:
        say(f"sparkdoctor (allowed, not enforced): {reason}")
    if not verdict.reasons:
        say("sparkdoctor: every gate passed")
    return {"reasons": verdict.reasons, "gates": verdict.ran, "allowed": verdict.allowed}


def memory_model(recipe: object, hosts: Iterable[object] | None, timeout: float = HOSTS_TIMEOUT) -> tuple[str | None, str | None]:
    """(the checkpoint folder the memory verdict sizes, None), or (None, why it is not judged): the memory free now is
    this machine's, so the launch must run here (every host of sparkrun's plan local: sparkrun.utils.net
    is_local_host, within `timeout` s for them all), and the model must be on disk (a folder, or an org/name already in
    the Hugging Face cache: sparkrun downloads a missing one later, after this step)."""
    from sparkdoctor.audit.errors import AuditError
    from sparkdoctor.audit.locate import resolve_model

    names = [str(h) for h in hosts or ()]
    local = _which_local(names, timeout)
    remote = [h for h in names if local.get(h) is False]
    if remote:
        return None, f"the launch runs on {', '.join(remote[:3])}, not here (sparkdoctor fleet check judges a node's memory)"
    unknown = [h for h in names if h not in local]
    if unknown:
        return None, (f"sparkrun's is_local_host did not say within {timeout:g} s whether {', '.join(unknown[:3])} is this "
                      "machine (a name lookup that does not answer, or an error)")
    ref = str(getattr(recipe, "model", "") or "")
    try:
        return str(resolve_model(ref)), None
    except AuditError:
        shown = ref if len(ref) <= 200 else f"{ref[:120]}... ({len(ref):,} characters)"
        return None, f"the model {shown or '(none)'} is not on this machine yet (sparkrun fetches it after this step)"


def _which_local(hosts: list[str], timeout: float) -> dict[str, bool]:
    """{host: whether sparkrun's is_local_host says it is this machine} for the hosts it answered within `timeout` s:
    it runs in a daemon thread, left behind (it never holds the process at its exit) on a lookup that does not answer."""
    found: dict[str, bool] = {}

    def ask() -> None:
        try:
            from sparkrun.utils.net import is_local_host

            for host in hosts:
                found[host] = bool(is_local_host(host))
        except Exception:  # sparkrun's own failure: the hosts left are not known to be this machine, as on no answer
            return

    asking = threading.Thread(target=ask, name="sparkrun-is-local-host", daemon=True)
    asking.start()
    asking.join(timeout)
    return dict(found)


def export_recipe(recipe: Any, overrides: Mapping[str, object] | None, folder: Path) -> Path:
    """The recipe as sparkrun resolved it (its matched `overrides:` layers and the run's serve overrides baked in:
    Recipe.to_dict(effective=True)), written as sparkrun recipe YAML for `recipe check`."""

    data = recipe.to_dict(overrides=dict(overrides or {}), effective=True)
    for key in NOT_FOR_RECIPE_CHECK:
        data.pop(key, None)
    defaults = data.setdefault("defaults", {})
    if isinstance(defaults, dict) and defaults.get("port") in (None, ""):
        defaults["port"] = SPARKRUN_PORT  # sparkrun serves on it when neither the recipe nor the run names one
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(recipe.name or "recipe"))[:80] or "recipe"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def resolve_mods(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(paths of the recipe's mods, refs not found): an absolute path, or sparkrun's adjacent rule
    (core/mods.py _resolve_adjacent: `REF` and `mods/REF` beside the recipe file, a leading `mods/` stripped, a
    folder with run.sh). Registry mods (`@registry/...`, the recipe's registry, eugr's) are fetched by sparkrun
    later and are not judged here."""
    found, missing = [], []
    base = Path(recipe.source_path).parent if getattr(recipe, "source_path", None) else None
    for ref in [str(m) for m in getattr(recipe, "mods", None) or []]:
        try:  # `~nosuchuser/m` or a name past NAME_MAX is not beside the recipe: never an error that ends the launch
            candidates = [Path(ref).expanduser()] if Path(ref).expanduser().is_absolute() else []
            if base is not None and not ref.startswith("@"):
                rel = ref.removeprefix("mods/")
                candidates += [base / rel, base / "mods" / rel]
            hit = next((c for c in candidates if c.is_dir() and (c / "run.sh").exists()), None)
        except (OSError, RuntimeError):
            hit = None
        if hit is not None:
            found.append(str(hit.resolve()))
        else:
            missing.append(ref)
    return found, missing


def say(line: str) -> None:
    """One line on sparkrun's stderr (its log output is for its own records)."""
    print(line, file=sys.stderr, flush=True)
