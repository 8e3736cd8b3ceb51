"""YAML for recipes: PyYAML's safe loader (what the recipe runners use), bounded, plus a record of duplicate keys.

PyYAML (like the runners that read these recipes) silently keeps the last of two equal keys in one
mapping; a real eugr recipe has `container:` twice. sparkdoctor reads it the same way, but says so:
every duplicate is returned with its line numbers, so a reader can warn instead of guessing.

Everything the safe loader accepts is accepted, merge keys (`<<: *base`) included, with three bounds,
each checked on the composed node graph before a single Python object is built:
  * the EXPANDED size: aliases share nodes, so a "billion laughs" document of 70 aliases is a few
    hundred nodes on paper and 4.7 million strings once built (and gigabytes once shown as JSON). The
    graph is walked with each node's expanded size remembered, so the walk is linear in the document,
    and the document is refused when its expansion passes MAX_NODES nodes or MAX_CHARS characters;
  * an anchor that contains itself (`&a [*a]`) expands without end: refused, naming the line;
  * a value the constructor cannot build (an integer of over 4,300 digits, a date like 2026-13-45, a
    string with a lone surrogate escape) is refused naming its line, as is a character YAML forbids (a
    control character).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from sparkdoctor.inputs import read_text
from sparkdoctor.recipes.model import RecipeError

MAX_BYTES = 16 * 1024 * 1024  # a recipe is a few KB; this is a file that is surely something else
MAX_NODES = 200_000  # expanded: the largest real recipe has a few hundred
MAX_CHARS = 16 * 1024 * 1024  # expanded scalar text
MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    def __init__(self, why: str, node: yaml.Node | None = None):
        super().__init__(why)
        self.node = node


class _Loader(yaml.SafeLoader):
    """SafeLoader that notes duplicate keys instead of dropping them without a word, and turns every value
    it cannot construct into a marked error."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_object(self, node, deep=False):
        try:
            value = super().construct_object(node, deep=deep)
            if isinstance(value, str):
                value.encode("utf-8")  # a "\ud800" escape: a lone surrogate no file, terminal or JSON consumer takes
            return value
        except UnicodeEncodeError:
            raise yaml.constructor.ConstructorError(None, None, "a string holds a lone surrogate (a \\uD800-\\uDFFF "
                                                    "escape), which is not text", node.start_mark) from None
        except (ValueError, OverflowError) as exc:  # int('9' * 5000), a 13th month, ...
            why = "an integer of over 4,300 digits" if "4300 digits" in str(exc) else _one_line(str(exc))[:120]
            raise yaml.constructor.ConstructorError(None, None, f"a value YAML cannot read: {why}",
                                                    node.start_mark) from None

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self._note_duplicates(node)
        return super().construct_mapping(node, deep=deep)  # flattens merge keys first, as SafeLoader does

    def _note_duplicates(self, node: yaml.MappingNode) -> None:
        """Duplicates among the keys written in this mapping (a key that overrides a merged one is not one)."""
        seen: dict[object, int] = {}
        for key_node, _value in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            try:
                key = self.construct_object(key_node, deep=True)
                hash(key)
            except TypeError:
                continue  # unhashable key: let the base class raise its own error
            line = key_node.start_mark.line + 1
            if key in seen:
                self.duplicates.append(f"key {key!r} appears twice (lines {seen[key]} and {line}); the last one wins")
            seen[key] = line


def expanded_size(root: yaml.Node) -> tuple[int, int]:
    """(nodes, scalar characters) of `root` once every alias is expanded; _Refused past the bounds or on a
    cycle. Iterative (no recursion limit) and linear: each shared node is sized once."""
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            nodes, chars = 1, 0
            for child in _children(node):
                n, c = sizes[id(child)]
                nodes, chars = nodes + n, chars + c
            if nodes > MAX_NODES or chars > MAX_CHARS:
                raise _Refused(f"its aliases expand it to over {MAX_NODES:,} nodes or {MAX_CHARS // (1024 * 1024)} MiB of "
                               "text (a \"billion laughs\" document); no file sparkdoctor reads needs that much", node)
            sizes[key] = (nodes, chars)
            continue
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = (1, len(node.value))
            continue
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise _Refused("an anchor contains an alias of itself (it would expand without end)", child)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def read_yaml(path: Path, max_bytes: int = MAX_BYTES) -> tuple[Any, list[str]]:
    """(the document, its duplicate-key notes); RecipeError naming the file and line on bad YAML."""

    try:
        text = read_text(path, max_bytes)
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read: {exc.strerror or exc}") from None
    loader = None
    try:
        loader = _Loader(text)  # checks every character: a control character is a ReaderError here
        node = loader.get_single_node()
        if node is None:
            return None, []
        expanded_size(node)
        doc = loader.construct_document(node)
    except _Refused as exc:
        where = f" line {exc.node.start_mark.line + 1}:" if exc.node is not None else ""
        raise RecipeError(f"{path}:{where} {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" line {mark.line + 1}" if mark else ""
        raise RecipeError(f"{path}:{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML forbids (a control character)
        line = text.count("\n", 0, exc.position) + 1
        raise RecipeError(f"{path}: line {line}: not valid YAML: character #x{exc.character:04x} is not allowed "
                          "(a control character)") from None
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {_one_line(str(exc))}") from None
    except RecursionError:
        raise RecipeError(f"{path}: nested too deeply to read") from None
    except (ValueError, TypeError, AttributeError, OverflowError) as exc:  # a value PyYAML's own constructors choke on
        raise RecipeError(f"{path}: not valid YAML: a value cannot be read ({type(exc).__name__}: "
                          f"{_one_line(str(exc))[:200]})") from None
    finally:
        if loader is not None:
            loader.dispose()
    return doc, list(loader.duplicates)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200]
