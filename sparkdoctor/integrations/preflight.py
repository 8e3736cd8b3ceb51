"""sparkdoctor's gates before a launch another tool makes (sparkrun's, through sparkrun_plugin): `recipe check` on
the recipe as that tool resolved it and `mods check` on its mods, each run as a sparkdoctor subprocess with a time
limit (sparkdoctor.proc), their JSON documents read into one-line reasons.

A gate that finds something at or above `fail_on` gives its findings' titles; a gate that could not judge (a bad
recipe, no vLLM to judge against, an image that is not on this machine, a timeout) gives one reason saying why:
a gate the user asked for and that did not run is not a pass. The launch is refused when there is a reason,
unless `allow` is set (in the recipe's item, or SPARKDOCTOR_SPARKRUN_ALLOW=1 in the environment); then the
reasons are printed and the launch goes on.

With `model` (the recipe's checkpoint, when the plugin finds it on this machine and the launch runs here),
`recipe check` also judges whether the launch fits in the memory free now (sparkdoctor/memory/): a launch that does
not fit as written (memory-fits-with, memory-does-not-fit) is refused whatever `fail_on` says, as bench refuses it,
because it would not start; the settings that fit are in the reason.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field

from sparkdoctor import proc
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer
from sparkdoctor.text import with_remedy

SEVERITIES = ("info", "warn", "error")
RANK = {name: rank for rank, name in enumerate(SEVERITIES)}
ALLOW_ENV = "SPARKDOCTOR_SPARKRUN_ALLOW"
DEFAULT_TIMEOUT = 600.0  # seconds per gate: a cold recipe check of a big venv, or a throwaway container of an image
OUTPUT_CAP = (4 * 1024 * 1024, 64 * 1024)  # a JSON document bigger than this is cut, and then unreadable: one reason
KEYS = ("fail_on", "python", "allow", "timeout")
WONT_START = ("memory-fits-with", "memory-does-not-fit")  # the launch as written does not fit now: refused at any fail_on


class SettingsError(ValueError):
    """The recipe's `sparkdoctor:` item is malformed (one line)."""


@dataclass(frozen=True)
class Settings:
    """The recipe's `sparkdoctor:` item: `true`, or a mapping of KEYS (`false`, the gate off, is the plugin's to
    honour: sparkrun_plugin.parse_item)."""

    fail_on: str = "error"
    """The lowest severity that refuses the launch (as `recipe check --fail-on`)."""
    python: str | None = None
    """The interpreter (or venv) of the vLLM to judge against, an absolute path (or ~/...); default: the recipe's
    container image, else as `recipe check` chooses."""
    allow: bool = False
    """Print the reasons and launch anyway."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds each gate may run."""

    @classmethod
    def parse(cls, value: object) -> Settings:
        if value is True or value is None:
            return cls()
        if not isinstance(value, dict):
            raise SettingsError("sparkdoctor: expected `true`, `false` (the gate off) or a mapping with fail_on, python, "
                                f"allow, timeout; got {type(value).__name__}")
        unknown = sorted(str(k) for k in value if k not in KEYS)
        if unknown:
            raise SettingsError(f"sparkdoctor: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
        fail_on = value.get("fail_on", "error")
        if fail_on not in SEVERITIES:
            raise SettingsError(f"sparkdoctor.fail_on: {fail_on!r}: choose one of {', '.join(SEVERITIES)}")
        python = value.get("python")
        if python is not None and (not isinstance(python, str) or not python.strip()):
            raise SettingsError("sparkdoctor.python: expected the path of an interpreter or a venv")
        if python is not None and not os.path.isabs(os.path.expanduser(python)):
            # relative to what? sparkrun's working folder is not the recipe's choice (a cloned recipe repository could
            # name an interpreter of its own there): only an interpreter the user names outright is run
            raise SettingsError(f"sparkdoctor.python: {python!r} is a relative path: name the interpreter (or venv) by "
                                "an absolute path or one under ~/")
        allow = value.get("allow", False)
        if not isinstance(allow, bool):
            raise SettingsError("sparkdoctor.allow: expected true or false")
        timeout = value.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
                or timeout <= 0:
            raise SettingsError("sparkdoctor.timeout: expected a number of seconds above 0")
        return cls(fail_on, os.path.expanduser(python) if python else None, allow, float(timeout))

    def to_dict(self) -> dict[str, object]:
        """The item as written back by the host tool: the keys that differ from the defaults."""
        return {k: v for k, v in asdict(self).items() if v != getattr(Settings, k)}


@dataclass(frozen=True)
class Gate:
    """One sparkdoctor command the launch waits on."""

    name: str
    argv: list[str]


@dataclass
class Verdict:
    """What the gates said about one launch."""

    reasons: list[str] = field(default_factory=list)
    """One line each: a finding at or above fail_on, a failing mod, or why a gate could not judge."""
    ran: list[dict[str, object]] = field(default_factory=list)
    """Each gate: its name, exit code (None: it did not finish) and seconds."""
    allowed: bool = False
    """The reasons are printed, not enforced (`allow`, or SPARKDOCTOR_SPARKRUN_ALLOW)."""

    @property
    def refused(self) -> bool:
        return bool(self.reasons) and not self.allowed

    def message(self) -> str:
        """The one line the host tool prints when it refuses the launch."""
        return "sparkdoctor refused the launch: " + "; ".join(self.reasons) + \
            f" (to launch anyway: allow: true in the recipe's sparkdoctor item, or {ALLOW_ENV}=1)"


def allowed_by_env(env: dict[str, str] | os._Environ[str]) -> bool:
    return env.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes")


def gates(recipe_file: str, mods: list[str], image: str | None, settings: Settings,
          python: str = sys.executable, model: str | None = None) -> list[Gate]:
    """The commands to run: `recipe check` on the recipe file (with `--model` when the checkpoint is known: the memory
    verdict), and `mods check` on its mods when it has any. The target is settings.python when set, else the image
    the recipe runs in, else recipe check's default."""
    base = [python, "-m", "sparkdoctor"]
    target = ["--python", settings.python] if settings.python else ["--image", image] if image else []
    memory = ["--model", model] if model else []
    out = [Gate("recipe check", [*base, "recipe", "check", recipe_file, "--format", "json",
                                 "--fail-on", settings.fail_on, *target, *memory])]
    if mods:
        out.append(Gate("mods check", [*base, "mods", "check", *mods, "--format", "json", *target]))
    return out


def reasons_of(gate: Gate, done: proc.ProcResult, fail_on: str) -> list[str]:
    """The one-line reasons in one gate's answer (none when it passed)."""
    if done.returncode is None:
        return [f"{gate.name} could not judge: {done.describe_failure()}"]
    try:
        doc = json_answer(done.stdout)
    except NotJSON as exc:
        doc = exc
    if not isinstance(doc, dict):
        return [f"{gate.name} could not judge: {f'its answer {doc}' if isinstance(doc, NumberTooLong) else done.describe_failure() if done.returncode else 'no JSON document'}"]
    errors = [e for e in doc.get("errors") or [] if isinstance(e, dict)]
    if done.returncode not in (0, 1) or doc.get("kind") == "error":
        said = str(errors[0].get("message")) if errors else done.describe_failure()
        return [f"{gate.name} could not judge: {said}"]
    if gate.name == "mods check":
        return [f"mods check: mod {m.get('name')} does not apply to {doc.get('target')}: {m.get('detail')}"
                for m in doc.get("mods") or [] if isinstance(m, dict) and m.get("verdict") == "fails"]
    return [f"recipe check: {_with_remedy(f)} [{f.get('id')}]" for f in doc.get("findings") or []
            if isinstance(f, dict) and (RANK.get(str(f.get("severity")), -1) >= RANK[fail_on] or f.get("id") in WONT_START)]


def _with_remedy(finding: dict[str, object]) -> str:
    """A memory verdict's title and its remedy (what holds the rest), the settings that fit said once."""
    title = str(finding.get("title"))
    return with_remedy(title, str(finding.get("remedy"))) if finding.get("id") in WONT_START and finding.get("remedy") else title


def judge(recipe_file: str, mods: list[str], image: str | None, settings: Settings,
          env: dict[str, str] | None = None, model: str | None = None) -> Verdict:
    """Run every gate (all of them, so that one refusal names every reason) and collect their reasons. `model`: the
    checkpoint folder (or cached org/name) the launch loads, for the memory verdict (None: not judged)."""
    env = dict(os.environ if env is None else env)
    verdict = Verdict(allowed=settings.allow or allowed_by_env(env))
    for gate in gates(recipe_file, mods, image, settings, model=model):
        done = proc.run(gate.argv, timeout=settings.timeout, env=env, max_output=OUTPUT_CAP)
        verdict.ran.append({"gate": gate.name, "exit_code": done.returncode, "seconds": round(done.seconds, 2)})
        verdict.reasons += [" ".join(reason.split()) for reason in reasons_of(gate, done, settings.fail_on)]  # 1 line
    return verdict
