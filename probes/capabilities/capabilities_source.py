"""Reading Python source as data: locating blocks, parsing them, and deciding whether a
compute-capability condition holds on GB10 (SM121). Imported only when a rule has to run: a warm
(cached) run never parses anything.
"""

import ast
import re
import textwrap

GPU_CC = (12, 1)  # the questions are about GB10


FREE = "free"  # a condition that does not depend on the GPU: assume it can hold


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def find_block(text, pattern):
    """(source, first line) of the def/class/assignment whose first line matches `pattern` (re.M)."""
    m = re.search(pattern, text, re.M)
    if not m:
        return None, None
    start = text.rfind("\n", 0, m.start()) + 1
    lines = text[start:].split("\n")
    indent = len(lines[0]) - len(lines[0].lstrip())
    body = [lines[0]]
    for line in lines[1:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or len(line) - len(line.lstrip()) > indent or stripped[0] in ")]}":
            body.append(line)
            continue
        break
    while body and not body[-1].strip():
        body.pop()
    return textwrap.dedent("\n".join(body)), line_of(text, start)


def parse(source):
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def has_string(node, value):
    return any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(node))


def names_in(node):
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def const(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


class CapabilityEval(object):
    """Evaluate an `if` test as it would run on a GPU of compute capability GPU_CC.

    Results: True / False; FREE when it depends on something other than the GPU (CUDA version,
    dtype, a flag), taken as satisfiable; None when the expression is beyond these rules.
    Local assignments in the enclosing function are followed (is_sm120 = major == 12 and minor == 0).
    """

    def __init__(self, func_node, cc=GPU_CC):
        self.cc = cc
        self.assigned = {}
        for n in ast.walk(func_node):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                target = n.targets[0]
                if isinstance(target, ast.Name):
                    self.assigned[target.id] = n.value
                elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                    for i, e in enumerate(target.elts):
                        self.assigned[e.id] = ("unpack", n.value, i)

    def value(self, node, depth=0):
        if depth > 20:
            return None
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.value(e, depth + 1) for e in node.elts]
            return FREE if any(i in (None, FREE) for i in items) else tuple(items)
        if isinstance(node, ast.Name):
            if node.id in ("major", "minor", "cc_major", "cc_minor") and node.id not in self.assigned:
                return self.cc[0] if "major" in node.id else self.cc[1]
            bound = self.assigned.get(node.id)
            if bound is None:
                return FREE
            if isinstance(bound, tuple) and bound[0] == "unpack":
                whole = self.value(bound[1], depth + 1)
                return whole[bound[2]] if isinstance(whole, tuple) and len(whole) > bound[2] else FREE
            return self.value(bound, depth + 1)
        if isinstance(node, ast.BoolOp):
            vals = [self.truth(self.value(v, depth + 1)) for v in node.values]
            if isinstance(node.op, ast.And):
                if False in vals:
                    return False
                return None if None in vals else (FREE if FREE in vals else True)
            if True in vals:
                return True
            return None if None in vals else (FREE if FREE in vals else False)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.truth(self.value(node.operand, depth + 1))
            return v if v in (None, FREE) else (not v)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = self.value(node.left, depth + 1), self.value(node.comparators[0], depth + 1)
            if None in (left, right):
                return None
            if FREE in (left, right):
                return FREE
            return compare(node.ops[0], left, right)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        return FREE

    def call(self, node, depth):
        fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        cc_int = self.cc[0] * 10 + self.cc[1]
        if fn in ("get_compute_capability", "get_device_capability"):
            return self.cc
        arg = self.value(node.args[0], depth + 1) if node.args else None
        if fn in ("is_device_capability", "has_device_capability", "is_device_capability_family"):
            if isinstance(arg, tuple) and len(arg) == 2:
                arg = arg[0] * 10 + arg[1]
            if not isinstance(arg, int):
                return None
            if fn == "is_device_capability":
                return cc_int == arg
            if fn == "has_device_capability":
                return cc_int >= arg
            return cc_int // 10 == arg // 10
        return FREE

    @staticmethod
    def truth(v):
        if v in (None, FREE) or isinstance(v, bool):
            return v
        return bool(v)


def compare(op, a, b):
    try:
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        if isinstance(op, ast.GtE):
            return a >= b
        if isinstance(op, ast.In):
            return a in b
        if isinstance(op, ast.NotIn):
            return a not in b
    except TypeError:
        return None
    return None


def returns_reachable(func_node, predicate, ev):
    """For each `return` whose value satisfies predicate: can it run on the GPU? [(True/False/None, line)]."""
    found = []

    def walk(stmts, path):
        for st in stmts:
            if isinstance(st, ast.Return) and st.value is not None and predicate(st.value):
                found.append((all_true(path), st.lineno))
            elif isinstance(st, ast.If):
                test = ev.truth(ev.value(st.test))
                walk(st.body, path + [test])
                walk(st.orelse, path + [None if test is None else (FREE if test == FREE else not test)])
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(st, field, []) or [], path)
                for h in getattr(st, "handlers", []) or []:
                    walk(h.body, path)

    walk(func_node.body, [])
    return found


def all_true(path):
    if False in path:
        return False
    return None if None in path else True
