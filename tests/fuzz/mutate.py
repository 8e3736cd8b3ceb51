"""Mutation at every depth: a copy of a real document with a few edits, each at a depth chosen first.

A mutant of a real file reaches the deep code paths that random data never gets past the first check.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.values import SPECIAL, VERSIONS

OPS = ("special", "replace", "special", "replace", "delete", "add", "rename", "wrap", "empty")
# Fields compared as versions: they get the versions that broke packaging and int() before.
VERSION_KEYS = frozenset({"version", "cuda", "ptxas_version", "libcuda", "bundled_cuda", "driver", "cuda_driver",
                          "torch_cuda", "specifier", "requirement", "vllm", "torch", "nvidia-cutlass-dsl", "triton"})


def _slots(doc: Any) -> list[list[tuple[Any, Any]]]:
    """(container, key) of every value in `doc`, grouped by depth (iteratively: no recursion limit)."""
    levels: list[list[tuple[Any, Any]]] = []
    frontier = [doc]
    while frontier:
        level, nxt = [], []
        for container in frontier:
            items = container.items() if isinstance(container, dict) else enumerate(container) if isinstance(container, list) else ()
            for key, value in items:
                level.append((container, key))
                if isinstance(value, (dict, list)):
                    nxt.append(value)
        if level:
            levels.append(level)
        frontier = nxt
    return levels


@st.composite
def mutated(draw, bases: list[Any], values: st.SearchStrategy[Any], keys: list[str], max_mutations: int = 4) -> Any:
    """A deep copy of one of `bases` with 1..max_mutations edits, each at a depth chosen first (so
    the top level is hit as often as the leaves)."""
    doc = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(1, max_mutations))):
        levels = _slots(doc)
        if not levels:
            break
        container, key = draw(st.sampled_from(draw(st.sampled_from(levels))))
        op = draw(st.sampled_from(OPS))
        if op == "replace":
            container[key] = draw(values)
        elif op == "special":
            container[key] = draw(st.sampled_from(VERSIONS if key in VERSION_KEYS else SPECIAL))
        elif op == "delete":
            del container[key]
        elif op == "empty":
            container[key] = draw(st.sampled_from([[], {}, "", 0]))
        elif op == "wrap":  # the right value inside the wrong shape
            container[key] = draw(st.sampled_from([[container[key]], {"value": container[key]}]))
        elif isinstance(container, dict):
            new = draw(st.one_of(st.sampled_from(keys), st.text(max_size=12)))
            if op == "rename":
                container[new] = container.pop(key)
            else:
                container[new] = draw(values)
        else:
            container.append(draw(values))
    return doc
