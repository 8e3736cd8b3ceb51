"""Which of the user's pip settings fix's pip keeps (those that reach the package index) and which the plan names as set
aside; the container target's pip calls narrowed the same way inside the target, with nothing of the user's settings
on the command line that starts them (`docker exec -e ...` is readable by every user of the host); the target lock
taken again by the process that holds it (fix --yes takes it before its check, the apply again)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor import proc
from sparkdoctor.fix import pip_settings
from sparkdoctor.fix.installers import _fail, for_target
from sparkdoctor.fix.inventory import Inventory
from sparkdoctor.fix.journal import key_digest, target_lock
from sparkdoctor.targets.early import PIP_NO_SITE
from sparkdoctor.targets.local import PythonTarget
from tests.fix import scenario

LISTED = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.extra-index-url='https://alice:s3cret@second.example/simple'
:env:.user='1'
:env:.find-links='/opt/wheels'
global.index-url='https://mirror.example/simple'
global.trusted-host='mirror.example'
install.pre='true'
install.target='/tmp/t'
install.no-binary=':all:'
install.use-feature='truststore'
download.proxy='http://proxy:3128'
freeze.all='true'
"""


def test_the_settings_that_reach_the_index_are_kept_and_the_others_named_with_why():
    settings = pip_settings.parse(LISTED)
    assert settings[(":env:", "user")] == "1" and settings[("global", "index-url")] == "https://mirror.example/simple"
    found = pip_settings.set_aside(settings)
    assert found == [
        "PIP_EXTRA_INDEX_URL=https://***@second.example/simple: an index beside the index-url can serve any package the plan "
        "names (dependency confusion); to install from it, make it the index-url",
        "PIP_USER=1: installs into the user's site-packages (~/.local), not the target's environment",
        "[install] no-binary = :all: (a pip config file): fix installs wheels only",
        "[install] pre = true (a pip config file): lets in pre-releases the plan does not name",
        "[install] target = /tmp/t (a pip config file): installs somewhere else than the target's environment",
        "[install] use-feature = truststore (a pip config file): changes what pip does; fix installs exactly its plan",
    ], found
    assert "s3cret" not in pip_settings.note(settings)  # type: ignore[operator]
    assert pip_settings.note(pip_settings.parse(":env:.cert='/c'\nglobal.index-url='https://m/simple'\n")) is None
    assert "cert" in pip_settings.KEEP and "index-url" in pip_settings.KEEP and "extra-index-url" not in pip_settings.KEEP


def test_a_remote_page_of_links_beside_an_index_is_set_aside_as_an_extra_index_is_and_kept_as_the_only_source():
    """Before: find-links was kept whatever it named, so a remote page served the plan's packages beside the index,
    and no note said so. Now only the user's own files (a folder, file://) are kept beside an index."""
    listed = ":env:.find-links='/opt/wheels https://links.example/wheels/ file:///srv/w'\nglobal.find-links='http://old/'\n"
    found = pip_settings.set_aside(pip_settings.parse(listed))
    why = pip_settings._WHY["find-links"]
    assert found == [f"PIP_FIND_LINKS=https://links.example/wheels/: {why}", f"[global] find-links = http://old/ (a pip config file): {why}"]
    assert "dependency confusion" in why and "folder" in why
    assert pip_settings.set_aside(pip_settings.parse(listed + "install.no-index='true'\n")) == []  # the only source
    assert pip_settings.set_aside(pip_settings.parse(listed + ":env:.no-index='0'\ninstall.no-index='1'\n")) == found
    assert pip_settings.set_aside(pip_settings.parse(":env:.find-links='/opt/wheels file:///srv/w'\n")) == []


def test_the_sources_set_aside_are_said_in_the_one_line_of_a_package_not_found():
    """Before: a package only an extra index (set aside) had failed the plan's dry run, exit 6, and its one line did not
    say that the index was set aside, nor how to install from it (the plan's note is printed with a plan only)."""
    settings = pip_settings.parse(":env:.extra-index-url='https://u:pw@cuda.example/simple'\nglobal.find-links='https://l/'\n"
                                  "install.pre='1'\n")
    sources = pip_settings.sources_set_aside(settings)
    assert sources is not None and "pw" not in sources
    assert "PIP_EXTRA_INDEX_URL=https://***@cuda.example/simple; [global] find-links = https://l/" in sources, sources
    assert "pre" not in sources and "make it the index-url (PIP_INDEX_URL)" in sources
    assert pip_settings.sources_set_aside(pip_settings.parse("install.pre='1'\n")) is None
    lost = proc.ProcResult(["pip"], 1, "", "ERROR: No matching distribution found for torch==2.9.0+cu130\n", 1.0)
    line = str(_fail("pip dry run of torch==2.9.0+cu130", lost, True, sources))
    assert line.endswith(f"nothing was changed; {sources}") and "\n" not in line, line
    other = proc.ProcResult(["pip"], 1, "", "ERROR: Could not install packages due to an OSError: disk full\n", 1.0)
    assert sources not in str(_fail("pip install x", other, False, sources))  # only where a package was not found


def test_the_target_script_keeps_only_the_users_own_find_links_beside_an_index(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("target_pip_dry_under_test", PIP_NO_SITE)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /opt/wheels https://links.example/w/\nextra-index-url = https://x/simple\n")
    keep = set(pip_settings.KEEP)
    for env, links in (({}, "/opt/wheels"), ({"PIP_FIND_LINKS": "https://only.example/"}, None),
                       ({"PIP_NO_INDEX": "1"}, "/opt/wheels https://links.example/w/"),
                       ({"PIP_FIND_LINKS": "file:///w https://a/ /b"}, "file:///w /b")):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
        monkeypatch.setattr(os, "environ", {**environ, "PIP_CONFIG_FILE": str(conf), **env})
        script._only_settings(keep, "install")
        assert os.environ.get("PIP_FIND_LINKS") == links, (env, os.environ.get("PIP_FIND_LINKS"))
        assert "PIP_EXTRA_INDEX_URL" not in os.environ and os.environ["PIP_CONFIG_FILE"] == os.devnull


class RecordedContainer:
    """A target of kind `container` whose scripts run under a real local venv's interpreter, each call's argv and env
    recorded: the container target's installer is the one under test (for_target's container branch), the runtime
    is not. The user's settings come from this process's environment, as a container's from its own."""

    kind = "container"
    name = "recorded"

    def __init__(self, python: Path):
        self.inner = PythonTarget(str(python), "--python")
        self.python = str(python)
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def describe(self) -> dict[str, object]:
        return {"kind": "container", "python": self.python, "container": self.name}

    def run_script(self, script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None):
        self.calls.append((list(args), dict(env or {})))
        return self.inner.run_script(script, args, timeout, env=env)


@pytest.mark.slow
def test_a_container_targets_pip_runs_with_only_the_kept_settings(tmp_path, wheels, monkeypatch):
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    monkeypatch.setenv("PIP_USER", "1")  # pip: "Can not perform a '--user' install ... not visible in this virtualenv"
    monkeypatch.setenv("PIP_NO_DEPS", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    (tmp_path / "pip.conf").write_text("[install]\nupgrade = true\nrequirement = /nonexistent/requirements.txt\n")
    target = RecordedContainer(python)
    inventory = Inventory(python=str(python), is_venv=True, has_pip=True, writable=True, purelib=str(site),
                          version="3", dists={})
    installer = for_target(target, inventory)  # type: ignore[arg-type]

    resolution = installer.dry_run(["cattrs==23.2.3"], ignore_installed=True)
    assert resolution.installs == {"cattrs": "23.2.3", "attrs": "23.2.0"}, resolution.installs  # its dependency too
    (note,) = installer.set_aside()
    for shown in ("PIP_USER=1", "PIP_NO_DEPS=1", "[install] upgrade = true", "[install] requirement = /nonexistent"):
        assert shown in note, note
    assert "PIP_NO_INDEX" not in note and "PIP_FIND_LINKS" not in note
    pip_calls = [(args, env) for args, env in target.calls if "--list-settings" not in args]
    assert pip_calls and all(args[:2] == pip_settings.keep_argument() for args, _ in pip_calls), target.calls
    # the dry run read them on its way (the note costs no pip start of its own), and nothing read them again
    assert pip_calls[0][0][2] == "--print-settings" and len(pip_calls) == len(target.calls), target.calls
    assert not [k for _, env in target.calls for k in env if k.startswith("PIP_")], target.calls


def test_the_lock_taken_again_by_its_holder_is_held_until_the_outer_hold_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKDOCTOR_STATE_DIR", str(tmp_path / "state"))
    lock = tmp_path / "state" / "locks" / f"{key_digest('venv:/x')}.lock"
    probe = "import fcntl, sys; f = open(sys.argv[1], 'a')\ntry:\n fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\nexcept OSError: print('held')"

    def seen() -> str:
        return subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True, timeout=60).stdout.strip()

    with target_lock("venv:/x", "/x/bin/python"):
        with target_lock("venv:/x", "/x/bin/python"):
            assert seen() == "held"
        assert seen() == "held"
    assert seen() == "free"


def test_the_settings_a_dry_run_printed_first_read_as_the_listed_ones_and_leave_pips_output_alone():
    listed = pip_settings.parse(LISTED)
    as_read = {f"{section}.{key}": value for (section, key), value in listed.items()}
    line = pip_settings.SHOWN + json.dumps(as_read, sort_keys=True)
    settings, rest = pip_settings.shown(f"{line}\nERROR: pip's own line\n")
    assert settings == listed and rest == "ERROR: pip's own line\n"
    assert pip_settings.shown(f"{pip_settings.SHOWN}{{}}\n") == ({}, "")  # none set: read, and nothing to name
    assert pip_settings.shown("ERROR: no line first\n") == (None, "ERROR: no line first\n")
    assert pip_settings.shown(f"{pip_settings.SHOWN}[1]\nrest\n") == (None, "rest\n")
    assert pip_settings.kept_only(None) and pip_settings.kept_only({"PIP_CONSTRAINT": "/c", "PIP_NO_INDEX": "1"})
    assert not pip_settings.kept_only({"PIP_CONSTRAINT": "/c", "PIP_USER": "1"})
