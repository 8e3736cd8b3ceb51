"""`sparkdoctor recipe show`: a resolved recipe as versioned JSON. sparkdoctor/views/recipe.py shows it to a
person, every value beside where it came from.
"""

from __future__ import annotations

import json

from sparkdoctor.recipes.model import Recipe

SCHEMA = 1


def document(recipe: Recipe) -> dict[str, object]:
    """The `recipe` JSON document's own keys (docs/json.md)."""
    return {"schema": SCHEMA, "recipe": recipe.to_dict()}


def to_json(recipe: Recipe) -> str:
    return json.dumps(document(recipe), indent=2)
