"""The user's pip settings as fix's pip sees them: a fix installs exactly what its plan says, into the target's
environment, so only the settings needed to reach the package index at all are kept; every other one is set aside,
and the plan says which and why.

The target's interpreter does the narrowing (targets/target_pip_dry.py `--keep-settings KEEP`): the kept values stay
in the target's environment or its pip config files and are never put on a command line (a container's are passed to
pip inside the container, not through `docker exec -e`). Here, the target's own settings (its environment and every pip
config file, as pip merges them: `target_pip_dry.py --list-settings`) become the plan's note.
"""

from __future__ import annotations

import ast
import json
import re

KEEP = ("index-url", "cert", "client-cert", "proxy", "trusted-host", "timeout", "default-timeout", "retries",
        "keyring-provider", "no-index", "find-links", "constraint", "cache-dir", "no-cache-dir", "break-system-packages")
"""Kept: how pip reaches the index (or the wheel folder of a box without one) and may write its cache; the
constraints fix edits and reads itself; PEP 668's consent, which fix's --system checks. find-links is kept where it
names the user's own files (a folder, a file:// URL: how a box without an index reaches its wheels); a remote page of
links (http://, https://) is a source beside the index, set aside as extra-index-url is, unless no-index makes it the
only source (then it is the user's index, as index-url is). targets/target_pip_dry.py applies the same rule."""

QUIET = frozenset({"disable-pip-version-check", "no-input", "progress-bar", "quiet", "verbose", "no-color", "log",
                   "log-file", "local-log", "root-user-action", "no-warn-script-location", "no-warn-conflicts",
                   "require-virtualenv", "exists-action", "no-python-version-warning", "config-file", "isolated"})
"""Dropped without a word: they change what pip prints or asks, not where or what it installs."""

_ELSEWHERE = "installs somewhere else than the target's environment"
_WHAT = "changes which packages the install touches"
_WHY = {
    "user": "installs into the user's site-packages (~/.local), not the target's environment",
    "target": _ELSEWHERE, "prefix": _ELSEWHERE, "root": _ELSEWHERE, "src": _ELSEWHERE,
    "python": "runs pip for another interpreter",
    "extra-index-url": "an index beside the index-url can serve any package the plan names (dependency confusion); to "
                       "install from it, make it the index-url",
    "find-links": "a remote page of links beside the index can serve any package the plan names (dependency confusion); "
                  "to install from it, put its wheels in a folder and name that folder in find-links",
    "pre": "lets in pre-releases the plan does not name",
    "upgrade": _WHAT, "upgrade-strategy": _WHAT, "force-reinstall": _WHAT, "ignore-installed": _WHAT, "no-deps": _WHAT,
    "requirement": "installs what the plan does not name", "editable": "installs what the plan does not name",
    "dry-run": "the install would change nothing",
    "only-binary": "fix installs wheels only", "no-binary": "fix installs wheels only", "prefer-binary": "fix installs wheels only",
}
_OTHER = "changes what pip does; fix installs exactly its plan"
_LINE = re.compile(r"^(:env:|[A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)=(.*)$")
_NAME = re.compile(r"^(:env:|[A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$")
SHOWN = "sparkdoctor-pip-settings: "
"""target_pip_dry.py's first line under `--print-settings` (its SHOWN): every setting pip read, as one JSON object."""
_USERINFO = re.compile(r"(://)[^/@\s]+@")
COMMANDS = ("global", "install", "download", "uninstall")
_TRUE = frozenset({"1", "true", "yes", "y", "on", "t"})  # pip's strtobool


def remote_link(entry: str) -> bool:
    """A find-links entry that is not the user's own files: a URL of any scheme but file:."""
    return "://" in entry and not entry.lower().startswith("file:")


def only_source(settings: dict[tuple[str, str], str]) -> bool:
    """no-index is on for the install (pip's order: the environment, [install], [global]): find-links is then the
    only source, the user's index."""
    value = next((settings[(s, "no-index")] for s in (":env:", "install", "global") if (s, "no-index") in settings), "")
    return value.strip().lower() in _TRUE


def keep_argument() -> list[str]:
    """The target script's option that narrows pip's settings to KEEP."""
    return ["--keep-settings", ",".join(KEEP)]


def kept_only(env: dict[str, str] | None) -> bool:
    """Whether env (a pip call's own variables) sets only kept settings: the settings such a call reads are the
    user's, as far as a plan's note goes (it names only those set aside)."""
    return all(k.startswith("PIP_") and k[4:].lower().replace("_", "-") in KEEP for k in env or {})


def shown(stdout: str) -> tuple[dict[tuple[str, str], str] | None, str]:
    """The settings a `--print-settings` pip call printed first, as parse() gives them (None without that line), and
    the rest of its output: what pip wrote, read as before (an error message never quotes the settings' URLs)."""
    first, _, rest = stdout.partition("\n")
    if not first.startswith(SHOWN):
        return None, stdout
    try:
        items = json.loads(first[len(SHOWN):])
    except ValueError:
        return None, rest
    if not isinstance(items, dict):
        return None, rest
    out: dict[tuple[str, str], str] = {}
    for name, value in items.items():
        if m := _NAME.match(str(name)):
            out[(m.group(1), m.group(2).lower().replace("_", "-"))] = str(value)
    return out, rest


def parse(text: str) -> dict[tuple[str, str], str]:
    """(section, key) -> value from lines as `pip config list` writes them (`install.user='true'`, `:env:.pre='1'`)."""
    out: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        try:
            value = ast.literal_eval(m.group(3))
        except (ValueError, SyntaxError):
            value = m.group(3)
        out[(m.group(1), m.group(2).lower().replace("_", "-"))] = str(value)
    return out


def set_aside(settings: dict[tuple[str, str], str]) -> list[str]:
    """One entry per setting fix's pip runs without, with its value (a URL's user and password hidden) and why."""
    out: list[str] = []
    alone = only_source(settings)
    for (section, key), value in sorted(settings.items()):
        if not value.strip() or section not in (":env:", *COMMANDS) or key in QUIET:
            continue
        if key == "find-links":  # kept but for its remote pages beside an index
            value = "" if alone else " ".join(e for e in value.split() if remote_link(e))
            if not value:
                continue
        shown = _USERINFO.sub(r"\1***@", value)[:120]
        where = f"PIP_{key.upper().replace('-', '_')}={shown}" if section == ":env:" else f"[{section}] {key} = {shown} (a pip config file)"
        if key not in KEEP or key == "find-links":
            out.append(f"{where}: {_WHY.get(key, _OTHER)}")
    return out


def note(settings: dict[tuple[str, str], str]) -> str | None:
    """The plan's line about the user's pip settings, None when fix's pip sets none aside."""
    found = set_aside(settings)
    if not found:
        return None
    return ("fix's pip runs without these pip settings (it installs exactly this plan, into the target's environment; "
            "only those that reach the package index are kept): " + "; ".join(found))


def sources_set_aside(settings: dict[tuple[str, str], str]) -> str | None:
    """For the one line of a plan whose package was not found: the package sources fix's pip ran without (an extra
    index, a remote page of links) and how to install from one; None when none was set aside."""
    found = [line.split(": ", 1)[0] for line in set_aside(settings)
             if line.startswith(("PIP_EXTRA_INDEX_URL=", "PIP_FIND_LINKS=")) or " extra-index-url = " in line
             or " find-links = " in line]
    if not found:
        return None
    return ("fix's pip ran without these package sources beside the index (dependency confusion): " + "; ".join(found)
            + "; a package only there is not found: to install from one, make it the index-url (PIP_INDEX_URL), or put "
            "its wheels in a folder named in find-links")


__all__ = ["KEEP", "SHOWN", "keep_argument", "kept_only", "note", "only_source", "parse", "remote_link", "set_aside", "shown",
           "sources_set_aside"]
