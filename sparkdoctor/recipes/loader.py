"""Find a recipe file and read it with the reader its content calls for.

A name with no path part (e.g. `qwen36-nvfp4-w4a4`) is looked up in the shipped recipes/ folder
(name, name.toml, name.yaml, name.yml); anything else is a path. `.toml` is sparkdoctor's format; a
YAML file is eugr v1 when it says `recipe_version: "1"`, or declares no version and carries `build_args`/`mods`
(sparkrun's own detection rule), else sparkrun v2.
"""

from __future__ import annotations

from pathlib import Path

from sparkdoctor.inputs import a_url, kernel_file, kind_of
from sparkdoctor.locations import data_dir
from sparkdoctor.recipes import eugr, ours, sparkrun
from sparkdoctor.recipes.model import Recipe, RecipeError
from sparkdoctor.recipes.yamlsafe import read_yaml

SUFFIXES = ("", ".toml", ".yaml", ".yml")


def shipped_dir() -> Path | None:
    try:
        return data_dir("recipes")
    except FileNotFoundError:
        return None


def shipped() -> list[Path]:
    """The recipes shipped with sparkdoctor."""
    root = shipped_dir()
    if root is None:
        return []
    return sorted(p for p in root.iterdir() if p.suffix in (".toml", ".yaml", ".yml") and p.is_file())


def find(path_or_name: str | Path) -> Path:
    """The file a recipe argument names; RecipeError saying where it looked."""
    if why := a_url(str(path_or_name)):
        raise RecipeError(why)
    given = Path(path_or_name)
    if given.is_file():
        if (real := kernel_file(given)) is not None:  # /proc/kmsg is a "regular file" whose read waits for the kernel
            raise RecipeError(f"{given}: {real} is a kernel file, not a recipe file (name a .toml or .yaml file)")
        return given
    if given.exists():  # a directory, a FIFO, a device (a link to /dev/zero): said, never opened
        raise RecipeError(f"{given}: {kind_of(given)}, not a recipe file (name a .toml or .yaml file)")
    text = str(path_or_name)
    if "/" not in text and text not in ("", ".", ".."):
        root = shipped_dir()
        if root is not None:
            for suffix in SUFFIXES:
                candidate = root / f"{text}{suffix}"
                if candidate.is_file():
                    return candidate
            names = ", ".join(p.stem for p in shipped()) or "none"
            raise RecipeError(f"{text}: no such recipe file, and no shipped recipe of that name (shipped: {names})")
    raise RecipeError(f"{given}: no such recipe file")


def load(path_or_name: str | Path, overrides: dict[str, str] | None = None) -> Recipe:
    """Read, template and override a recipe of any supported format into one Recipe."""
    path = find(path_or_name)
    if path.suffix == ".toml":
        return ours.read(ours.read_toml(path), path, overrides)

    doc, duplicates = read_yaml(path)
    if not isinstance(doc, dict):
        if path.suffix not in (".yaml", ".yml"):
            raise RecipeError(f"{path}: not a recipe (name a .toml or .yaml file)")
        raise RecipeError(f"{path}: a recipe is a YAML mapping of fields, not a {type(doc).__name__}")
    version = str(doc.get("sparkrun_version", doc.get("recipe_version", "")))
    # `mods`/`build_args` mark an eugr recipe only when no other version is declared: a sparkrun v2 recipe has mods too
    if version == "1" or (not version and ("build_args" in doc or "mods" in doc)):
        return eugr.read(doc, path, duplicates, overrides)

    return sparkrun.read(doc, path, duplicates, overrides)
