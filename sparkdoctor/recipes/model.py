"""What a recipe resolves to: one model for every recipe format sparkdoctor reads.

A recipe (ours in TOML, eugr/spark-vllm-docker v1 YAML, sparkrun v2 YAML) is read, templated and
overridden by its reader; what comes out is a Recipe whose `argv` is the exact command a launcher
runs. Nothing downstream (launcher, bench, ledger, rerun) ever sees a format's own spelling.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from sparkdoctor.errors import InputError, OneLine

FORMATS = ("sparkdoctor", "eugr-v1", "sparkrun-v2")
DEFAULT_READINESS = "/health"
# Flags whose values the launcher replaces (it binds 127.0.0.1 on a free port): left out of the fingerprint.
BIND_FLAGS = ("--host", "--port")
# A matrix entry id (what a workaround's `because` names), as the matrix spells ids.
ID_WORDS = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")


class RecipeError(OneLine, InputError, ValueError):
    """A recipe that cannot be read or resolved; the message names the file and the field, in one line."""

    code = "recipe"


@dataclass(frozen=True)
class Recipe:
    """A recipe with every template filled in and every override applied.

    name: the recipe's own name (its `name` field, else the file name).
    source_path: the file it was read from.
    format: one of FORMATS.
    argv: the command, fully resolved, as an argument list (never a shell string).
    env: environment variables the command runs with (values as strings).
    host, port: where the recipe says the server listens (from --host/--port in argv, else the recipe's
        fields or defaults, else None); the launcher overrides both.
    model: the model path or hub id the server loads.
    served_model_name: the name clients send as `model` (the --served-model-name, else `model`).
    readiness_path: the HTTP path that answers 200 once the server is ready.
    workload: what to measure by default (prompts, max_tokens, concurrency, repeats, ...), as the recipe says.
    workarounds: flags and env vars the recipe carries only because of a known problem:
        [{"flag": "--enforce-eager", "because": "<matrix entry id>"}] or [{"env": "NAME", "because": ...}].
    container: the container image the recipe runs in, or None for a command run in the target environment.
    needs: what the recipe needs to run: "gb10", "model:<id>", "cluster:<nodes>".
    params: the template parameters after defaults and overrides ({key: value as a string}).
    sources: where each resolved value came from: {"param:port": "defaults in FILE", "env:X": "--set", ...}.
    warnings: things a reader should know that did not stop it (duplicate YAML keys, dropped keys, ...).
    description: the recipe's description, if any.
    extras: format-specific fields kept for display (mods, build_args, benchmark, metadata, runtime).
    shell: what makes the command a shell line (`'&&'`, `'|'`, `'$('`, "a second line"), which the recipe's own runner
        hands to a shell; None for one program with its arguments. sparkdoctor launches no shell: bench refuses it.
    """

    name: str
    source_path: str
    format: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    host: str | None = None
    port: int | None = None
    model: str | None = None
    served_model_name: str | None = None
    readiness_path: str = DEFAULT_READINESS
    workload: dict[str, Any] = field(default_factory=dict)
    workarounds: list[dict[str, str]] = field(default_factory=list)
    container: str | None = None
    needs: list[str] = field(default_factory=list)
    params: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    description: str = ""
    extras: dict[str, Any] = field(default_factory=dict)
    shell: str | None = None

    def __post_init__(self) -> None:
        # an image reference never starts with "-": one that does would be read by the container CLI as its option
        if self.container is not None and self.container.lstrip().startswith("-"):
            raise RecipeError(f"{self.source_path}: container {self.container[:80]!r} is not an image name (it reads as "
                              "an option of the container CLI)")
        # a NUL (YAML's "\0", TOML's "\u0000") ends a C string: no program can be given it, and the launch stopped on
        # Python's "embedded null byte" after the recipe had been read and shown as if it could run
        where = next((f"argument {i + 1} of the command ({str(a)[:60]!r})" for i, a in enumerate(self.argv) if "\0" in str(a)), None)
        where = where or next((f"env {str(k)[:40]!r}" for k, v in self.env.items() if "\0" in str(k) + str(v)), None)
        if where is None and self.container is not None and "\0" in self.container:
            where = "the container image"
        if where is not None:
            raise RecipeError(f"{self.source_path}: {where} holds a NUL byte (\\0), which no program, variable or image name "
                              "can hold: remove it")

    def mods(self) -> list[str]:
        """The mod paths the recipe names (its `mods` or `patches`), as written."""
        out: list[str] = []
        for key in ("mods", "patches"):
            value = (self.extras or {}).get(key)
            if isinstance(value, (list, tuple)):
                out += [str(v) for v in value if isinstance(v, (str, int, float)) and str(v).strip()]
            elif isinstance(value, str) and value.strip():
                out.append(value)
        return out

    def fingerprint(self) -> str:
        """A stable hash (16 hex digits) of what was resolved: argv (less the --host/--port values the
        launcher replaces), env, model, served name, container and readiness path. Equal fingerprints
        launch the same server; the recipe's name, file and comments do not count."""
        doc = {
            "argv": strip_flags(self.argv, BIND_FLAGS),
            "env": dict(sorted(self.env.items())),
            "model": self.model,
            "served_model_name": self.served_model_name,
            "container": self.container,
            "readiness_path": self.readiness_path,
        }
        blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data: every field, copied, in order, with the fingerprint after `format`."""
        data = asdict(self)
        head = {key: data.pop(key) for key in ("name", "source_path", "format")}
        return {**head, "fingerprint": self.fingerprint(), **data}


def recipe_from_dict(doc: Mapping[str, object]) -> Recipe:
    """A Recipe back from `to_dict()` (e.g. read from the ledger); RecipeError naming a missing field. The
    stored fingerprint must match the one recomputed, so a hand-edited record is refused."""
    if not isinstance(doc, dict):
        raise RecipeError("a stored recipe must be a mapping")
    known = set(Recipe.__dataclass_fields__)
    try:
        recipe = Recipe(**{k: v for k, v in doc.items() if k in known})
    except TypeError as exc:
        raise RecipeError(f"stored recipe: {exc}") from None
    if "fingerprint" in doc and doc["fingerprint"] != recipe.fingerprint():
        raise RecipeError(f"stored recipe {recipe.name!r}: fingerprint {doc['fingerprint']} does not match its "
                          f"contents ({recipe.fingerprint()})")
    return recipe


def vllm_spelling(arg: str) -> str:
    """`--max_model_len[=V]` as vLLM's FlexibleArgumentParser reads it, `--max-model-len[=V]`: underscores in an
    option's name are dashes (its value is left as it is); anything else unchanged."""
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    return "--" + name[2:].replace("_", "-") + eq + value


def flag_value(argv: list[str], flag: str) -> str | None:
    """The value of the last `flag VALUE` or `flag=VALUE` in argv (vLLM's argparse: the last one wins; `--flag_name`
    is `--flag-name`)."""
    found = None
    for i, arg in enumerate(vllm_spelling(a) for a in argv):
        if arg == flag and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(flag + "="):
            found = arg[len(flag) + 1:]
    return found


def strip_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """argv without `flags` and their values (`--flag VALUE`, `--flag=VALUE`)."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in flags:
            next(args, None)  # its value
        elif not arg.startswith(tuple(f + "=" for f in flags)):
            out.append(arg)
    return out
