"""The text edits of the fix vocabulary, as pure functions of a file's text: a pin in a constraints
or requirements file, a line in an env file, a flag in a serving recipe (recipes/*.toml with
`command = [argv list]` and `env = {table}`).

Pure, so the plan shows the exact line diff that apply will write, and tests need no target.
Every edit changes only the lines it is about; everything else stays byte for byte.
"""

from __future__ import annotations

import difflib
import json
import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from sparkdoctor.fix.envfile import env_lines
from sparkdoctor.fix.interface import FixError
from sparkdoctor.inputs import toml_module

tomllib = toml_module()

_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


def _ending(line: str) -> str:
    """The line break `line` ends with, as str.splitlines (and pip's requirements reader) split: a form feed,
    \\x85 or \\u2028 ends a line as \\n does, so an edited line keeps it and the next line stays its own."""
    body = line.splitlines()[0] if line else ""
    return line[len(body):]


def _split_comment(line: str) -> tuple[str, str]:
    m = re.search(r"(^|\s+)#", line)
    return (line[: m.start()], line[m.start():]) if m else (line, "")


def edit_pin(text: str, package: str, specifier: str | None, where: str) -> str:
    """Change (specifier) or remove (None) every pin of `package`; FixError when there is none."""
    want = canonicalize_name(package)
    out, found = [], False
    for line in text.splitlines(keepends=True):
        ending = _ending(line)
        body, comment = _split_comment(line[: len(line) - len(ending)])
        req_text = body.strip()
        try:
            req = Requirement(req_text) if req_text and not req_text.startswith("-") else None
        except InvalidRequirement:
            req = None
        if req is None or canonicalize_name(req.name) != want or req.url:
            out.append(line)
            continue
        found = True
        if specifier is None:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        marker = f"; {req.marker}" if req.marker else ""
        indent = body[: len(body) - len(body.lstrip())]
        out.append(f"{indent}{req.name}{extras}{specifier}{marker}{comment}{ending}")
    if not found:
        raise FixError(f"{where}: no pin of {package} to change (was the file edited since check read it?)")
    return "".join(out)


def unset_env(text: str, names: list[str]) -> str:
    drop = set(names)
    return "".join(ln for ln in env_lines(text) if not ((m := _ENV_LINE.match(ln)) and m.group(1) in drop))


def set_env(text: str, name: str, value: str) -> str:
    quoted = value if re.fullmatch(r"[A-Za-z0-9_./:,+-]*", value) else "'" + value.replace("'", "'\\''") + "'"
    new_line, out, done = f"{name}={quoted}", [], False
    for ln in env_lines(text):  # split as the env file's readers split it (fix/envfile.py), not as splitlines does
        m = _ENV_LINE.match(ln)
        if m and m.group(1) == name:
            if not done:
                out.append(new_line + ln[len(ln.rstrip("\r\n")):])
                done = True
            continue
        out.append(ln)
    if not done:
        if out and not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append(new_line + "\n")
    return "".join(out)


def _command_span(text: str, where: str) -> tuple[int, int]:
    """Start and end offsets of the `command = [...]` array's brackets in a recipe."""
    m = re.search(r"(?m)^\s*command\s*=\s*\[", text)
    if not m:
        raise FixError(f"{where}: field 'command' (an argv list) is missing")
    i, depth, quote = m.end() - 1, 0, None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return m.end() - 1, i + 1
        i += 1
    raise FixError(f"{where}: field 'command' is not a closed array")


def _recipe_command(text: str, where: str) -> list[str]:
    try:
        doc = tomllib.loads(text.removeprefix("\ufeff"))  # a byte-order mark, as the recipe reader passes it over
    except tomllib.TOMLDecodeError as exc:
        raise FixError(f"{where}: not valid TOML: {str(exc).splitlines()[0]}") from None
    cmd = doc.get("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
        raise FixError(f"{where}: field 'command' must be a non-empty list of strings")
    return cmd


def _flag_positions(cmd: list[str], flag: str) -> list[int]:
    drop = []
    for i, arg in enumerate(cmd):
        if arg.startswith(flag + "="):
            drop.append(i)
        elif arg == flag:
            drop.append(i)
            if i + 1 < len(cmd) and not cmd[i + 1].startswith("-"):
                drop.append(i + 1)
    return drop


def _replace_command(text: str, cmd: list[str], where: str) -> str:
    start, end = _command_span(text, where)
    new = text[:start] + "[" + ", ".join(json.dumps(a) for a in cmd) + "]" + text[end:]
    if _recipe_command(new, where) != cmd:  # never write a recipe that does not read back as planned
        raise FixError(f"{where}: the edited 'command' does not read back as planned")
    return new


def drop_flag(text: str, flag: str, where: str) -> str:
    cmd = _recipe_command(text, where)
    drop = set(_flag_positions(cmd, flag))
    return text if not drop else _replace_command(text, [a for i, a in enumerate(cmd) if i not in drop], where)


def add_flag(text: str, flag: str, value: str | None, where: str) -> str:
    cmd = _recipe_command(text, where)
    drop = set(_flag_positions(cmd, flag))
    kept = [a for i, a in enumerate(cmd) if i not in drop]
    return _replace_command(text, kept + [flag] + ([value] if value is not None else []), where)


def line_diff(old: str, new: str) -> list[str]:
    """'- line' / '+ line' for what changed (unified, no context): what the plan shows."""
    return [ln.rstrip("\n") for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
