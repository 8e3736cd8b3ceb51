"""YAML for recipes: PyYAML's safe loader, plus a record of duplicate keys.

PyYAML (like the runners that read these recipes) silently keeps the last of two equal keys in one
mapping; a real eugr recipe has `container:` twice. sparkdoctor reads it the same way, but says so:
every duplicate is returned with its line numbers, so a reader can warn instead of guessing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sparkdoctor.recipes.model import RecipeError


class _Loader(yaml.SafeLoader):
    """SafeLoader that notes duplicate keys instead of dropping them without a word."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            try:
                key = self.construct_object(key_node, deep=True)
                hash(key)
            except TypeError:
                continue  # unhashable key: let the base class raise its own error
            line = key_node.start_mark.line + 1
            if key in seen:
                self.duplicates.append(f"key {key!r} appears twice (lines {seen[key]} and {line}); the last one wins")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> tuple[Any, list[str]]:
    """(the document, its duplicate-key notes); RecipeError naming the file and line on bad YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    loader = _Loader(text)
    try:
        doc = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}" if mark else ""
        raise RecipeError(f"{path}:{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from None
    except RecursionError:
        raise RecipeError(f"{path}: nested too deeply to read") from None
    finally:
        loader.dispose()
    return doc, list(loader.duplicates)
