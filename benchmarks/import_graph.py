"""The import graph of sparkdoctor/, read from the source (ast; nothing is imported).

    python benchmarks/import_graph.py [--json]

Every `import` and `from ... import` counts, at module level or inside a function (a function's import runs when
the function does). Names imported from a package resolve to its submodule where one exists
(`from sparkdoctor.fix import pipeline` is an import of sparkdoctor.fix.pipeline).

- **circles**: sets of modules that import each other, directly or through others (strongly connected
  components of the module graph with more than one module); "two-file" circles are those of two modules.
- **units**: a package directly under sparkdoctor/ (bench, fix, ...) or a module directly under it (check.py,
  emit.py, ...). The unit graph has an arrow A -> B when a module of A imports a module of B.
- **up-level imports**: the fewest module imports to take out so that the unit graph has no circle (an exact
  minimum over each strongly connected set of units, weighted by how many module imports make each arrow). They
  are the imports that run against the grain: removing them leaves units that import one way.
- **levels**: with the up-level imports taken out, a unit's level is the longest chain of unit imports below
  it (a unit that imports no other unit is level 0); the count is the highest level + 1.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path

PACKAGE = "sparkdoctor"


def module_files(root: Path) -> dict[str, Path]:
    files = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _resolve(name: str, modules: set[str]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path) -> dict[str, dict[str, int]]:
    """module -> {imported module: how many import statements}."""
    files = module_files(root)
    modules = set(files)
    graph: dict[str, dict[str, int]] = {m: defaultdict(int) for m in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{alias.name}" for alias in node.names]
                targets = [t if t in modules else prefix for t in targets]
            for target in targets:
                if not target.startswith(PACKAGE):
                    continue
                found = _resolve(target, modules)
                if found and found != module and found != PACKAGE:
                    graph[module][found] += 1
    return {m: dict(t) for m, t in graph.items()}


def strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = itertools.count()
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = next(counter)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = next(counter)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(sorted(component))
    return out


def unit_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _minimum_feedback(nodes: list[str], arrows: dict[tuple[str, str], int]) -> set[tuple[str, str]]:
    """The cheapest set of arrows whose removal leaves `nodes` without a circle: exact, by dynamic programming
    over the orders of the nodes (bottom first), an arrow that points to a node placed above its source costing
    its weight. 2**n states: the strongly connected sets of units here are under 20."""
    index = {n: i for i, n in enumerate(nodes)}
    into = [[0] * len(nodes) for _ in nodes]  # into[v][x]: weight of x -> v
    for (a, b), weight in arrows.items():
        into[index[b]][index[a]] += weight
    full = (1 << len(nodes)) - 1
    cost = [0] + [sys.maxsize] * full
    choice = [0] * (full + 1)
    for placed in range(full + 1):
        if cost[placed] == sys.maxsize:
            continue
        for v in range(len(nodes)):
            if placed >> v & 1:
                continue
            extra = sum(w for x, w in enumerate(into[v]) if placed >> x & 1)
            nxt = placed | 1 << v
            if cost[placed] + extra < cost[nxt]:
                cost[nxt], choice[nxt] = cost[placed] + extra, v
    order: list[int] = []
    placed = full
    while placed:
        order.append(choice[placed])
        placed &= ~(1 << choice[placed])
    position = {nodes[v]: i for i, v in enumerate(reversed(order))}  # 0 = bottom
    return {(a, b) for (a, b) in arrows if position[b] > position[a]}


def measure(root: Path) -> dict:
    graph = imports(root)
    modules = sorted(graph)
    module_edges = {m: set(t) for m, t in graph.items()}
    circles = [c for c in strongly_connected(modules, module_edges) if len(c) > 1]

    units = sorted({unit_of(m) for m in modules})
    unit_arrows: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for module, targets in graph.items():
        for target, count in targets.items():
            a, b = unit_of(module), unit_of(target)
            if a != b:
                unit_arrows[(a, b)].extend([(module, target)] * count)
    unit_edges: dict[str, set[str]] = defaultdict(set)
    for a, b in unit_arrows:
        unit_edges[a].add(b)
    up: set[tuple[str, str]] = set()
    for component in strongly_connected(units, unit_edges):
        if len(component) == 1:
            continue
        inside = {(a, b): len(unit_arrows[(a, b)]) for (a, b) in unit_arrows if a in component and b in component}
        up |= _minimum_feedback(component, inside)

    below: dict[str, set[str]] = defaultdict(set)
    for a, b in unit_arrows:
        if (a, b) not in up:
            below[a].add(b)
    level: dict[str, int] = {}

    def level_of(unit: str) -> int:
        if unit not in level:
            level[unit] = 1 + max((level_of(b) for b in below[unit]), default=-1)
        return level[unit]

    for unit in units:
        level_of(unit)
    up_imports = sorted({pair for arrow in up for pair in unit_arrows[arrow]})
    return {
        "modules": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in module_files(root).values()),
        "imports": sum(len(t) for t in graph.values()),
        "circles": circles,
        "two_file_circles": [c for c in circles if len(c) == 2],
        "up_level_arrows": sorted(f"{a} -> {b}" for a, b in up),
        "up_level_imports": [f"{a} -> {b}" for a, b in up_imports],
        "levels": max(level.values()) + 1,
        "unit_levels": {u: level[u] for u in sorted(units, key=lambda u: (-level[u], u))},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="the whole measurement as JSON")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    result = measure(args.root)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['modules']} modules, {result['lines']} lines, {result['imports']} module imports")
    print(f"levels: {result['levels']}")
    print(f"circles: {len(result['circles'])} ({len(result['two_file_circles'])} of two files)")
    for circle in result["circles"]:
        print("  " + " <-> ".join(circle))
    print(f"up-level imports: {len(result['up_level_imports'])} (arrows: {', '.join(result['up_level_arrows'])})")
    for imp in result["up_level_imports"]:
        print("  " + imp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
