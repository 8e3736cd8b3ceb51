"""sparkdoctor's own recipe format (TOML in recipes/): the command as an argv list, and the reasons for its
workarounds, which is what `rerun` needs and no community format records.

Templating is eugr's strict rule applied to each argv element and env value: `{key}` comes from
`[defaults]` plus the top-level model, served_model_name, host and port (and --set overrides); a missing
key is an error naming it; `{{`/`}}` are literal braces. The full format is documented in
recipes/README.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparkdoctor.inputs import read_toml as read_toml_file
from sparkdoctor.recipes import resolve
from sparkdoctor.recipes.model import (
    DEFAULT_READINESS,
    ID_WORDS,
    Recipe,
    RecipeError,
    flag_value,
)
from sparkdoctor.recipes.yamlsafe import MAX_BYTES

SCHEMA = 1
FIELDS = {"schema", "name", "description", "command", "model", "served_model_name", "host", "port", "env",
          "defaults", "readiness_path", "workload", "workarounds", "container", "needs"}
TOP_PARAMS = ("model", "served_model_name", "host", "port")


def read_toml(path: Path) -> dict[str, object]:
    return read_toml_file(path, MAX_BYTES, RecipeError)


def read(doc: dict[str, Any], path: Path, overrides: dict[str, str] | None) -> Recipe:
    where = str(path)
    schema = doc.get("schema", SCHEMA)
    if schema != SCHEMA or type(schema) is not int:
        raise RecipeError(f"{where}: field 'schema' is {schema!r}; this sparkdoctor reads recipe schema {SCHEMA}")
    unknown = sorted(set(doc) - FIELDS)
    if unknown:
        raise RecipeError(f"{where}: unknown field(s): {', '.join(unknown)} (known: {', '.join(sorted(FIELDS))})")
    command = doc.get("command")
    if command is None:
        raise RecipeError(f"{where}: required field 'command' is missing (an argv list, e.g. [\"vllm\", \"serve\", \"{{model}}\"])")
    if not isinstance(command, list) or not command or not all(isinstance(a, (str, int, float)) for a in command):
        raise RecipeError(f"{where}: field 'command' must be a non-empty list of strings (an argv, not a shell line)")
    for name in ("name", "description", "model", "served_model_name", "host", "readiness_path", "container"):
        if name in doc and not isinstance(doc[name], str):
            raise RecipeError(f"{where}: field {name!r} must be a string")
    if "port" in doc and (type(doc["port"]) is not int or not 0 < doc["port"] < 65536):
        raise RecipeError(f"{where}: field 'port' must be a port number (1-65535)")

    params = resolve.string_map(doc.get("defaults"), where, "defaults")
    sources = {f"param:{k}": "defaults" for k in params}
    for key in TOP_PARAMS:
        if key in doc:
            params[key] = str(doc[key])
            sources[f"param:{key}"] = f"{key} field"
    env = resolve.string_map(doc.get("env"), where, "env")
    sources.update({f"env:{k}": "env" for k in env})
    resolve.apply_overrides(params, env, sources, overrides, set(TOP_PARAMS), where)

    room = resolve.Room()  # one for every template of the file: each element is formatted on its own
    argv = [resolve.format_strict(str(a), params, f"{where}: field 'command'[{i}]", room) for i, a in enumerate(command)]
    env = {k: resolve.format_strict(v, params, f"{where}: field 'env.{k}'", room) for k, v in env.items()}
    host, port = resolve.bind_of(argv, params, where)
    model = params.get("model") or resolve.model_in(argv)
    served = flag_value(argv, "--served-model-name") or params.get("served_model_name") or model
    readiness = doc.get("readiness_path", DEFAULT_READINESS)
    if not readiness.startswith("/"):
        raise RecipeError(f"{where}: field 'readiness_path' must start with '/' (e.g. \"/health\")")
    needs = [resolve.format_strict(n, params, f"{where}: field 'needs'", room) for n in _needs(doc.get("needs", []), where)]
    warnings: list[str] = []
    workarounds = _workarounds(doc.get("workarounds", []), argv, env, where, path, warnings)
    return Recipe(
        name=doc.get("name") or path.stem, source_path=str(path), format="sparkdoctor", argv=argv, env=env,
        host=host, port=port, model=model, served_model_name=served, readiness_path=readiness,
        workload=_table(doc.get("workload", {}), where, "workload"), workarounds=workarounds,
        container=doc.get("container") or None, needs=needs, params=params,
        sources=sources, warnings=warnings, description=doc.get("description", ""),
    )


def _table(value: object, where: str, field: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise RecipeError(f"{where}: field {field!r} must be a table")
    return dict(value)


def _needs(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RecipeError(f"{where}: field 'needs' must be a list of strings (e.g. [\"gb10\", \"model:ORG/NAME\"])")
    return list(value)


def _workarounds(value: object, argv: list[str], env: dict[str, str], where: str, path: Path,
                 warnings: list[str]) -> list[dict[str, str]]:
    """[{flag|env, because}]: exactly one of flag/env, and `because` a matrix entry id (the reason)."""
    if not isinstance(value, list):
        raise RecipeError(f"{where}: field 'workarounds' must be a list of tables ({{flag = ..., because = ...}})")
    out = []
    for i, item in enumerate(value):
        label = f"{where}: workarounds[{i}]"
        if not isinstance(item, dict):
            raise RecipeError(f"{label} must be a table {{flag = ..., because = ...}}")
        unknown = set(item) - {"flag", "env", "because"}
        if unknown:
            raise RecipeError(f"{label}: unknown field(s): {', '.join(sorted(unknown))} (known: flag, env, because)")
        kinds = [k for k in ("flag", "env") if k in item]
        if len(kinds) != 1 or not isinstance(item[kinds[0]], str) or not item[kinds[0]]:
            raise RecipeError(f"{label}: name exactly one of 'flag' or 'env' (a string)")
        because = item.get("because")
        if not isinstance(because, str) or not ID_WORDS.fullmatch(because):
            raise RecipeError(f"{label}: field 'because' must be the id of the matrix entry it works around")
        kind, what = kinds[0], item[kinds[0]]
        present = what in env if kind == "env" else any(a == what or a.startswith(what + "=") for a in argv)
        if not present:
            warnings.append(f"{path.name}: workaround {kind} {what} (because {because}) is not in the resolved "
                            f"{'env' if kind == 'env' else 'command'}")
        out.append({kind: what, "because": because})
    return out
