"""`sparkdoctor recipe show`: a resolved recipe as versioned JSON. sparkdoctor/views/recipe.py shows it to a
person, every value beside where it came from.
"""

from __future__ import annotations

from sparkdoctor.recipes.model import Recipe

SCHEMA = 1


def document(recipe: Recipe) -> dict[str, object]:
    """The `recipe` JSON document's own keys (docs/json.md)."""
    return {"schema": SCHEMA, "recipe": recipe.to_dict()}
