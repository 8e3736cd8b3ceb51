"""Recipes: the server a benchmark launches, read from three formats into one Recipe.

Modules, each importing only those above it:
  model     Recipe, RecipeError, the fingerprint
  resolve   templating (strict and lenient), overrides, argv splitting
  yamlsafe  PyYAML safe loading that reports duplicate keys
  ours      sparkdoctor's TOML format (recipes/README.md)
  eugr      eugr/spark-vllm-docker v1 YAML
  sparkrun  sparkrun v2 YAML
  loader    finding a recipe by path or shipped name, and choosing its reader
  vllm_config  the options of a command's `vllm serve --config FILE.yaml`, as vLLM's parser reads them
"""

from sparkdoctor.recipes.loader import find, load, shipped
from sparkdoctor.recipes.model import Recipe, RecipeError, recipe_from_dict

__all__ = ["Recipe", "RecipeError", "find", "load", "recipe_from_dict", "shipped"]
