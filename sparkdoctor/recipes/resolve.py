"""The steps every recipe format shares: templating, overrides, splitting a command into argv, and
reading host/port/model back out of the resolved argv.

Two templating rules exist in the wild and both are kept exactly, because a recipe must launch the
same command here as under its own runner:
- strict (eugr run-recipe.py, and ours): Python `str.format`; a missing key is an error that names it;
  `{{` and `}}` are literal braces;
- lenient (sparkrun v2): `{key}` (an identifier in braces) is replaced, repeatedly, until nothing
  changes; a placeholder with no value is kept as written; JSON braces pass through untouched.
"""

from __future__ import annotations

import re
import shlex
import string

from sparkdoctor.recipes.model import RecipeError, flag_value

# --set aliases, as run-recipe.py's override flags name them (--tp, --gpu-mem).
ALIASES = {"tp": "tensor_parallel", "gpu_mem": "gpu_memory_utilization"}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
ROUNDS = 10
MAX_EXPANDED = 65536  # characters a lenient substitution may grow to


MAX_FORMATTED = 1024 * 1024  # characters a recipe's str.format templates may expand to, together


class Room:
    """What is left of MAX_FORMATTED for the templates of one recipe (a TOML recipe formats each argv element and env
    value on its own: one Room for them all)."""

    def __init__(self, left: int = MAX_FORMATTED):
        self.left = left


class _Measured(string.Formatter):
    """str.format's fields, sized before any is built: a width of 10,000 or more (also one a nested field gives,
    `{port:{w}}`) is refused, and so is the expansion past the recipe's Room, each field before it is built."""

    def __init__(self, room: Room, where: str):
        self.room, self.where = room, where

    def format_field(self, value: object, format_spec: str) -> str:
        if re.search(r"\d{5,}", format_spec):
            raise RecipeError(f"{self.where}: format spec {format_spec!r} asks for a width of 10,000 characters or more")
        text = format(value, format_spec)
        self.room.left -= len(text)
        if self.room.left < 0:
            raise RecipeError(f"{self.where}: the templates expand past {MAX_FORMATTED // (1024 * 1024)} MiB (a command is "
                              "a few KB; is a width repeated, `{key:9999}`?)")
        return text  # a nested field's text is the spec of its outer one


def format_strict(template: str, params: dict[str, str], where: str, room: Room | None = None) -> str:
    """str.format(**params); RecipeError naming the missing key (and the ones there are), the bad brace, or an expansion
    past the recipe's `room` (default: a Room of its own)."""
    try:
        _Measured(room or Room(), where).vformat(template, (), params)  # sized field by field: nothing large is built
        return template.format(**params)
    except RecipeError:
        raise
    except KeyError as exc:
        key = exc.args[0] if exc.args else "?"
        have = ", ".join(sorted(params)) or "none"
        raise RecipeError(f"{where}: missing parameter {{{key}}} (the recipe's parameters: {have}; "
                          "write a literal brace as {{ or }})") from None
    except (IndexError, ValueError, AttributeError, TypeError) as exc:
        raise RecipeError(f"{where}: bad template: {exc} (write a literal brace as {{{{ or }}}})") from None


def placeholders_strict(template: str) -> set[str]:
    """The parameter names a str.format template refers to (bad templates: none)."""
    try:
        return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}
    except ValueError:
        return set()


def substitute_lenient(template: str, params: dict[str, str], where: str = "template") -> tuple[str, set[str]]:
    """sparkrun's rule: (the text, the placeholders left unresolved). `{{`/`}}` collapse to one brace
    when the template uses them (the v1 spelling sparkrun still honours). Parameters that refer to each
    other can grow without end ({a} = "{b}{b}", {b} = "{a}{a}"): past MAX_EXPANDED characters it is an error."""
    doubled = "{{" in template
    # the collapsed braces wait as two characters the template and the values do not hold (a fixed "\x00"/"\x01" turned
    # a "\0" or "\x01" the recipe wrote into a brace, and a NUL then passed as "{")
    used = set(template).union(*map(set, params.values())) if doubled else set()
    free = (chr(c) for c in (*range(0xE000, 0xF900), *range(0xF0000, 0x10FFFE)) if chr(c) not in used)  # private use
    opening, closing = (next(free, ""), next(free, "")) if doubled else ("", "")
    if doubled and not closing:
        raise RecipeError(f"{where}: the template holds every private-use character; no recipe needs them")
    text = template.replace("{{", opening).replace("}}", closing) if doubled else template
    for _ in range(ROUNDS):
        new = PLACEHOLDER.sub(lambda m: params.get(m.group(1), m.group(0)), text)
        if len(new) > MAX_EXPANDED:
            raise RecipeError(f"{where}: placeholders expand past {MAX_EXPANDED} characters (do parameters refer to each other?)")
        if new == text:
            break
        text = new
    unresolved = {m.group(1) for m in PLACEHOLDER.finditer(text) if m.group(1) not in params}
    if doubled:
        text = text.replace(opening, "{").replace(closing, "}")
    return text, unresolved


def split_command(text: str, where: str) -> tuple[list[str], str | None]:
    """A shell-style command (a YAML block scalar) into argv: backslash continuations joined, comments dropped,
    quotes honoured (a quoted argument may span lines, newlines kept). No shell ever runs it. With it, the operator
    that makes it a shell line (shell_operator), or "a second line" for a line break outside quotes and not escaped
    by a backslash between two commands; None for one command."""
    line, separated = _read_lines(text)
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise RecipeError(f"{where}: cannot split the command into arguments: {exc}") from None
    if not argv:
        raise RecipeError(f"{where}: the command is empty")
    return argv, shell_operator(line) or ("a second line" if separated else None)


# trailing blanks after the backslash forgiven (YAML editors leave them); a backslash that ends the text too (YAML's
# `|-` chomps the last line break: bash reads the command whole)
CONTINUATION = re.compile(r"\\[ \t]*(?:\n|$)")


def _read_lines(text: str) -> tuple[str, bool]:
    """`text` as a shell reads it outside quotes, in one pass: continuations removed, `#` comments (at a word's
    start) dropped; and whether a line break outside quotes ends a command that another follows."""
    out: list[str] = []
    quote = ""
    words = ended = separated = False  # words: this line has one; ended: a line with words was ended
    i = 0
    while i < len(text):
        c = text[i]
        if quote != "'" and (m := CONTINUATION.match(text, i)):
            i = m.end()
            continue
        step = 2 if c == "\\" and quote != "'" else 1  # an escaped character (in double quotes too) is kept whole
        if quote:
            quote = "" if c == quote else quote
        elif c == "\n":
            ended, words = ended or words, False
        elif c == "#" and (not out or out[-1][-1] in " \t\n"):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif c not in " \t":
            separated = separated or (ended and not words)
            words, quote = True, c if c in "'\"" else ""
        out.append(text[i:i + step])
        i += step
    return "".join(out), separated


SHELL_OPERATORS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", ">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", "(", ")"})


def shell_operator(line: str) -> str | None:
    """What makes `line` a shell line (`&&`, `|`, `>`, `$(`, a backquote...): its own runner hands it to a shell
    (sparkrun and run-recipe.py: `bash -c`); None for one program with its arguments. Quoted text
    (`--chat-template "a && b"`, `'$(x)'`) is an argument."""
    lex = shlex.shlex(line, posix=False, punctuation_chars=True)  # quotes kept: a quoted "&&" is not an operator
    lex.whitespace_split = True
    try:
        tokens = list(lex)
    except ValueError:  # quotes shlex.split accepted but the non-POSIX reader does not: no operator to find
        return None
    for before, token in zip([""] + tokens, tokens, strict=False):
        if token == "(" and before.endswith("$"):
            return "'$('"
        if token in SHELL_OPERATORS:
            return repr(token)
        if not token.startswith("'") and ("$(" in token or "`" in token):
            return "'$('" if "$(" in token else "'`'"
    found = expansion(line)
    return repr(found) if found else None


EXPANSION = re.compile(r"\$(?:\{[^}]*\}?|[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])")


def expansion(line: str) -> str | None:
    """The first parameter expansion (`$NAME`, `${NAME:-x}`, `$1`) outside single quotes and not escaped: the runner's
    shell puts a value there, and a program started without one gets the `$` text as written."""
    quote, i = "", 0
    while i < len(line):
        c = line[i]
        if quote == "'":
            quote = "" if c == "'" else quote
        elif c == "\\":
            i += 2
            continue
        elif c in "'\"" and quote in ("", c):
            quote = "" if quote else c
        elif c == "$" and (m := EXPANSION.match(line, i)):
            return m.group(0)
        i += 1
    return None


def shell_line_warning(name: str, what: str, operator: str) -> str:
    return (f"{name}: {what}: {operator} makes it a shell line, which its own runner hands to a shell; sparkdoctor "
            "starts one program with its arguments and never a shell, so `bench` will not launch it (here it is read "
            "as arguments)")


def split_model_warning(name: str, candidates: list[str], argv: list[str]) -> str | None:
    """A model path with whitespace that the shell split: vLLM gets its first word as the model and the rest as stray
    arguments, which `vllm serve` refuses ("unrecognized arguments")."""
    for model in candidates:
        words = model.split()
        if len(words) > 1 and model not in argv and words[0] in argv:
            return (f"{name}: model {model!r} holds whitespace and the command's shell splits it: vllm serve gets "
                    f"{words[0]!r} and stray arguments ({' '.join(words[1:])!r}), which it refuses; quote the placeholder "
                    "in the command (\"{model}\") or use a path without spaces")
    return None


def apply_overrides(params: dict[str, str], env: dict[str, str], sources: dict[str, str],
                    overrides: dict[str, str] | None, known: set[str], where: str) -> None:
    """Apply --set overrides in place: `env.NAME=value` sets an env var; any other key must be a parameter
    the recipe has (or one of `known`); run-recipe.py's --tp/--gpu-mem spellings are accepted."""
    for raw_key, value in (overrides or {}).items():
        if raw_key.startswith("env."):
            name = raw_key[4:]
            if not name:
                raise RecipeError(f"{where}: --set {raw_key}: name the variable (env.NAME=value)")
            if not ENV_NAME.fullmatch(name):  # as string_map checks the recipe's own env block
                raise RecipeError(f"{where}: --set {raw_key[:84]!r}: {name[:80]!r} is not an environment variable name "
                                  "(letters, digits, _)")
            if "\0" in value:
                raise RecipeError(f"{where}: --set {raw_key[:84]}: the value holds a NUL byte, which no environment variable can")
            env[name] = value
            sources[f"env:{name}"] = "--set"
            continue
        key = ALIASES.get(raw_key, raw_key)
        if key not in params and key not in known:
            have = ", ".join(sorted(set(params) | known)) or "none"
            raise RecipeError(f"{where}: --set {raw_key}: the recipe has no parameter {key!r} (its parameters: {have}; "
                              "env.NAME=value sets a variable)")
        params[key] = value
        sources[f"param:{key}"] = "--set"


def model_in(argv: list[str]) -> str | None:
    """The model a `vllm serve MODEL` (or `--model MODEL`) command loads."""
    if explicit := flag_value(argv, "--model"):
        return explicit
    for i, arg in enumerate(argv[:-1]):
        if arg == "serve" and not argv[i + 1].startswith("-"):
            return argv[i + 1]
    return None


def bind_of(argv: list[str], params: dict[str, str], where: str) -> tuple[str | None, int | None]:
    """(host, port) the command binds: its --host/--port, else the `host`/`port` parameters."""
    host = flag_value(argv, "--host") or params.get("host")
    port_text = flag_value(argv, "--port") or params.get("port")
    port = None
    if port_text is not None and not re.fullmatch(r"\{\w+\}", port_text):  # a sparkrun placeholder its launch fills
        try:
            port = int(port_text)
        except ValueError:
            raise RecipeError(f"{where}: port {port_text!r} is not a number") from None
        if not 0 < port < 65536:
            raise RecipeError(f"{where}: port {port} is out of range")
    return host, port


def string_map(value: object, where: str, field: str) -> dict[str, str]:
    """A mapping of names to scalars (an `env` or `defaults` block) as strings; None (a block holding only a
    comment) is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecipeError(f"{where}: field {field!r} must be a mapping of names to values")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise RecipeError(f"{where}: field {field!r} has a non-text key {k!r}")
        if isinstance(v, (dict, list)):
            raise RecipeError(f"{where}: field '{field}.{k}' must be a single value, not a {type(v).__name__}")
        out[k] = "" if v is None else str(v)  # as the runners render it: 1 -> "1", True -> "True", 0.85 -> "0.85"
        if field == "env" and not ENV_NAME.fullmatch(k):  # what exec would refuse at launch (`D=E`, ``, a newline)
            raise RecipeError(f"{where}: field 'env' has {k[:80]!r}, which is not an environment variable name (letters, digits, _)")
        if field == "env" and "\0" in out[k]:
            raise RecipeError(f"{where}: field 'env.{k}' holds a NUL byte, which no environment variable can")
    return out


# an environment variable's name, as a recipe's env block and `--set env.NAME=value` must spell it
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _ints(value: object) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool) and v > 0]


def benchy_workload(benchmark: object) -> dict[str, object]:
    """bench's defaults from a recipe's llama-benchy `benchmark.args` (eugr and sparkrun): tg -> max_tokens and
    pp -> prompt_tokens (the first when several are listed: bench measures one length; prompt_tokens is read by
    bench as words of prose), concurrency -> the concurrency levels. Only fields bench's workload has, so the
    recipe can be benched; depth (a context prefilled before the prompt) has no bench equivalent and stays
    visible in the recipe's `extras.benchmark`."""
    if not isinstance(benchmark, dict) or not isinstance(benchmark.get("args"), dict):
        return {}
    args = benchmark["args"]
    out: dict[str, object] = {}
    for key, field in (("tg", "max_tokens"), ("pp", "prompt_tokens")):
        if found := _ints(args.get(key)):
            out[field] = found[0]
    if levels := _ints(args.get("concurrency")):
        out["concurrency"] = levels
    return out
