"""The constraints collector: pip's precedence between its sources, and pip's requirements-file syntax."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.collect import Context, run_collectors
from sparkdoctor.collect import constraints as cons
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget


def make_ctx(env: dict | None = None, configs: list[tuple[Path, str]] | None = None, files: list[Path] | None = None) -> Context:
    facts = Facts()
    facts.env = dict(env or {})
    ctx = Context(target=PythonTarget(sys.executable, "test"), facts=facts, constraint_files=list(files or []))
    ctx.scratch["pip_config_files"] = [{"path": str(p), "text": t} for p, t in (configs or [])]
    return ctx


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pins(ctx: Context) -> list[tuple[str, str, str]]:
    """(name, specifier, source) of every entry; runs the collector."""
    return [(c["name"], c["specifier"], c["source"]) for c in cons.run(ctx)["constraints"]]


def errors(ctx: Context) -> list[str]:
    return [e["error"] for e in ctx.facts.errors]


@pytest.fixture(autouse=True)
def no_pip_constraint_here(monkeypatch):
    monkeypatch.delenv("PIP_CONSTRAINT", raising=False)


# ---- the pieces of pip's file syntax ---------------------------------------------------------------------
def test_logical_lines_join_continuations_and_drop_comments():
    text = "# header\n\nfoo==1.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\nbar>=2  # why\nurl#frag==1\n  # indented comment\n"
    assert cons.logical_lines(text) == [
        (3, "foo==1.0     --hash=sha256:aa     --hash=sha256:bb"),
        (6, "bar>=2"),
        (7, "url#frag==1"),  # '#' without a space before it is not a comment
    ]


def test_a_comment_ends_a_continuation():
    assert cons.logical_lines("foo==1.0 \\\n# note\nbar==2\n") == [(1, "foo==1.0"), (3, "bar==2")]


def test_trailing_backslash_at_end_of_file():
    assert cons.logical_lines("foo==1.0 \\") == [(1, "foo==1.0")]


def test_split_options():
    assert cons.split_options("foo==1.0 --hash=sha256:aa --hash=sha256:bb") == ("foo==1.0", "--hash=sha256:aa --hash=sha256:bb")
    assert cons.split_options('foo==1.0 ; python_version < "3.12"') == ('foo==1.0 ; python_version < "3.12"', "")


@pytest.mark.parametrize(
    "text,name,spec,marker,url",
    [
        ("torch<=2.14.1", "torch", "<=2.14.1", None, None),
        ('nvidia-cutlass-dsl[cu13]==4.4.2 ; platform_machine == "aarch64"', "nvidia-cutlass-dsl", "==4.4.2", 'platform_machine == "aarch64"', None),
        ("vllm @ https://example.org/vllm-0.22.0-cp38-abi3-linux_aarch64.whl", "vllm", "", None, "https://example.org/vllm-0.22.0-cp38-abi3-linux_aarch64.whl"),
        ("https://example.org/w/flashinfer_python-0.6.11-py3-none-any.whl", "flashinfer-python", "==0.6.11", None, "https://example.org/w/flashinfer_python-0.6.11-py3-none-any.whl"),
        ("./dist/triton-3.5.0.tar.gz", "triton", "==3.5.0", None, "./dist/triton-3.5.0.tar.gz"),
        ("git+https://github.com/vllm-project/vllm@v0.22.0#egg=vllm", "vllm", "", None, "git+https://github.com/vllm-project/vllm@v0.22.0#egg=vllm"),
    ],
)
def test_parse_requirement(text, name, spec, marker, url):
    got = cons.parse_requirement(text)
    assert (got["name"], got["specifier"], got["marker"], got["url"]) == (name, spec, marker, url)


def test_parse_requirement_extras():
    assert cons.parse_requirement("nvidia-cutlass-dsl[cu13]>=4.5")["extras"] == ["cu13"]


@pytest.mark.parametrize("text", [".", "./local/pkg", "git+https://github.com/vllm-project/vllm@main"])
def test_unnamed_requirements_pin_nothing(text):
    assert cons.parse_requirement(text) is None


@pytest.mark.parametrize("text", ["torch==", "torch >= >= 2", "what is this", "./x.whl ; python_version <<< 3"])
def test_bad_requirements(text):
    with pytest.raises(cons.BadLine):
        cons.parse_requirement(text)


# ---- reading files -------------------------------------------------------------------------------------
def test_entry_shape(tmp_path):
    f = write(tmp_path / "c.txt", 'torch<=2.14.1 ; python_version >= "3.10"\n')
    [entry] = cons.run(make_ctx(files=[f]))["constraints"]
    assert entry == {
        "file": str(f),
        "line": 1,
        "source": "--constraints",
        "requirement": 'torch<=2.14.1 ; python_version >= "3.10"',
        "name": "torch",
        "specifier": "<=2.14.1",
        "marker": 'python_version >= "3.10"',
        "extras": [],
        "url": None,
        "included_from": None,
    }


def test_hashes_and_continuations(tmp_path):
    f = write(tmp_path / "req.txt", "# pinned by pip-compile\nvllm==0.22.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via -r in\nflashinfer-python==0.6.11 --hash=sha256:cc\n")
    out = cons.run(make_ctx(files=[f]))["constraints"]
    assert [(c["name"], c["specifier"], c["line"], c["requirement"]) for c in out] == [
        ("vllm", "==0.22.0", 2, "vllm==0.22.0"),
        ("flashinfer-python", "==0.6.11", 6, "flashinfer-python==0.6.11"),
    ]


def test_bad_line_is_reported_and_reading_goes_on(tmp_path):
    f = write(tmp_path / "c.txt", "torch==2.13.0\ntorch >= >= 2\nvllm==0.22.0\n")
    ctx = make_ctx(files=[f])
    assert [p[0] for p in pins(ctx)] == ["torch", "vllm"]
    [err] = errors(ctx)
    assert err.startswith(f"{f}:2: not a requirement: ")
    assert "\n" not in err


def test_a_broken_url_is_a_bad_line_not_a_crash(tmp_path):
    """urlsplit raises on a broken IPv6 host; one such line must not cost the file's other pins."""
    f = write(tmp_path / "c.txt", "torch==2.13.0\nhttp://[::1/x-1.0-py3-none-any.whl\n-c http://[::1\nvllm==0.22.0\n")
    ctx = make_ctx(files=[f])
    assert [p[0] for p in pins(ctx)] == ["torch", "vllm"]
    assert errors(ctx) == [f"{f}:2: not a URL: Invalid IPv6 URL", f"{f}:3: http://[::1 is not a URL: Invalid IPv6 URL"]


def test_includes_are_relative_to_the_including_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the folder of the files: a cwd-relative reading would miss them
    write(tmp_path / "deep" / "sub" / "base.txt", "triton==3.5.0\n")
    write(tmp_path / "deep" / "more.txt", "torch==2.13.0\n")
    write(tmp_path / "deep" / "other.txt", "flashinfer-python==0.6.11\n")
    write(tmp_path / "deep" / "x.txt", "apache-tvm-ffi==0.1.12\n")
    top = write(
        tmp_path / "deep" / "top.txt",
        "-r sub/base.txt\n--constraint more.txt\n--requirement=other.txt\n-rx.txt\n-e ./editable\n--index-url https://example.org/simple\nvllm==0.22.0\n",
    )
    ctx = make_ctx(files=[Path("deep/top.txt")])
    out = cons.run(ctx)["constraints"]
    assert [c["name"] for c in out] == ["triton", "torch", "flashinfer-python", "apache-tvm-ffi", "vllm"]
    assert out[0]["included_from"] == "deep/top.txt:1" and out[0]["file"] == "deep/sub/base.txt"
    assert out[4]["included_from"] is None and out[4]["source"] == "--constraints"
    assert errors(ctx) == []
    assert top.exists()


def test_cycle_is_stopped_and_reported(tmp_path):
    a = write(tmp_path / "a.txt", "-r b.txt\ntorch==2.13.0\n")
    write(tmp_path / "b.txt", "-c a.txt\nvllm==0.22.0\n")
    ctx = make_ctx(files=[a])
    assert [p[0] for p in pins(ctx)] == ["vllm", "torch"]
    [err] = errors(ctx)
    assert err.startswith(f"{tmp_path / 'b.txt'}:1: includes ") and "a cycle" in err


def test_a_file_reached_twice_is_listed_once_without_complaint(tmp_path):
    write(tmp_path / "common.txt", "torch==2.13.0\n")
    a = write(tmp_path / "a.txt", "-r common.txt\n")
    b = write(tmp_path / "b.txt", "-r common.txt\n")
    ctx = make_ctx(files=[a, b, a])
    assert pins(ctx) == [("torch", "==2.13.0", "--constraints")]
    assert errors(ctx) == []


def test_missing_include_and_option_without_argument(tmp_path):
    f = write(tmp_path / "c.txt", "-r nope.txt\ntorch==2.13.0\n-c\n")
    ctx = make_ctx(files=[f])
    assert [p[0] for p in pins(ctx)] == ["torch"]
    assert errors(ctx) == [f"{f}:1: cannot read {tmp_path / 'nope.txt'}: No such file or directory", f"{f}:3: -c needs a file name"]


def test_env_var_expansion_uses_the_target_env(tmp_path):
    write(tmp_path / "pins" / "x.txt", "torch==2.13.0\n")
    f = write(tmp_path / "c.txt", "-r ${PINS_DIR}/x.txt\nvllm==${VLLM_VERSION}\n")
    ctx = make_ctx(env={"PINS_DIR": str(tmp_path / "pins"), "VLLM_VERSION": "0.22.0"}, files=[f])
    assert [(n, s) for n, s, _ in pins(ctx)] == [("torch", "==2.13.0"), ("vllm", "==0.22.0")]


def test_non_utf8_bytes_do_not_stop_reading(tmp_path):
    f = tmp_path / "c.txt"
    f.write_bytes(b"\xef\xbb\xbftorch==2.13.0  # caf\xe9\n")
    assert pins(make_ctx(files=[f])) == [("torch", "==2.13.0", "--constraints")]


# ---- PIP_CONSTRAINT ------------------------------------------------------------------------------------
def test_pip_constraint_several_files_url_and_missing(tmp_path):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    b = write(tmp_path / "b c" / "b.txt", "vllm==0.22.0\n")
    value = f"{a}   https://example.org/pins.txt\t{tmp_path / 'missing.txt'} file://{b.as_posix().replace(' ', '%20')}"
    ctx = make_ctx(env={"PIP_CONSTRAINT": value})
    assert pins(ctx) == [("torch", "==2.13.0", "PIP_CONSTRAINT"), ("vllm", "==0.22.0", "PIP_CONSTRAINT")]
    assert errors(ctx) == [
        "PIP_CONSTRAINT: https://example.org/pins.txt is a URL; sparkdoctor does not download it, so the pins in it are unknown",
        f"PIP_CONSTRAINT: cannot read {tmp_path / 'missing.txt'}: No such file or directory",
    ]


def test_pip_constraint_from_this_process_when_the_target_env_lacks_it(tmp_path, monkeypatch):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(a))
    assert pins(make_ctx(env={"PATH": "/usr/bin"})) == [("torch", "==2.13.0", "PIP_CONSTRAINT")]


# ---- pip config files ------------------------------------------------------------------------------------
def test_pip_config_later_file_wins_and_install_beats_global(tmp_path):
    g1 = write(tmp_path / "g1.txt", "torch==2.10.0\n")
    g2 = write(tmp_path / "g2.txt", "torch==2.11.0\n")
    inst = write(tmp_path / "inst.txt", "torch==2.12.0\n")
    site = tmp_path / "etc" / "pip.conf"
    user = tmp_path / "home" / "pip.conf"
    # global only: the later file wins
    ctx = make_ctx(configs=[(site, f"[global]\nconstraint = {g1}\n"), (user, f"[global]\nconstraint = {g2}\n")])
    assert pins(ctx) == [("torch", "==2.11.0", f"pip-config: {user}")]
    # [install] in the EARLIER file still beats [global] in the later one
    ctx = make_ctx(configs=[(site, f"[install]\nconstraint = {inst}\n"), (user, f"[global]\nconstraint = {g2}\n")])
    assert pins(ctx) == [("torch", "==2.12.0", f"pip-config: {site}")]


def test_pip_config_file_order_follows_pip_not_the_list(tmp_path):
    """The target probe lists PIP_CONFIG_FILE first; pip lets it beat site, user and global files."""
    env_pins = write(tmp_path / "env.txt", "torch==2.13.0\n")
    site_pins = write(tmp_path / "site.txt", "torch==2.12.0\n")
    glob_pins = write(tmp_path / "global.txt", "torch==2.11.0\n")
    ctx = make_ctx()
    ctx.scratch["pip_config_files"] = [
        {"path": "/pipconf/env.conf", "kind": "env", "text": f"[global]\nconstraint = {env_pins}\n"},
        {"path": "/etc/xdg/pip/pip.conf", "kind": "global", "text": f"[global]\nconstraint = {glob_pins}\n"},
        {"path": "/venv/pip.conf", "kind": "site", "text": f"[global]\nconstraint = {site_pins}\n"},
    ]
    assert pins(ctx) == [("torch", "==2.13.0", "pip-config: /pipconf/env.conf")]
    ctx.scratch["pip_config_files"] = ctx.scratch["pip_config_files"][1:]
    assert pins(ctx) == [("torch", "==2.12.0", "pip-config: /venv/pip.conf")]


def test_pip_config_key_spellings_and_multiple_files(tmp_path):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    b = write(tmp_path / "b.txt", "vllm==0.22.0\n")
    conf = tmp_path / "pip.conf"
    ctx = make_ctx(configs=[(conf, f"[global]\nConstraint =\n    {a}\n    {b}\n")])
    assert [p[0] for p in pins(ctx)] == ["torch", "vllm"]
    ctx = make_ctx(configs=[(conf, f"[global]\n--constraint = {a}\n")])
    assert [p[0] for p in pins(ctx)] == ["torch"]


def test_pip_config_constraints_key_is_ignored_like_pip_does(tmp_path):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    conf = tmp_path / "pip.conf"
    ctx = make_ctx(configs=[(conf, f"[global]\nconstraints = {a}\n")])
    assert pins(ctx) == []
    assert errors(ctx) == [f"{conf}: [global] constraints = {a}: pip reads the key 'constraint', so pip ignores this one"]


def test_pip_config_empty_value_and_other_sections(tmp_path):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    conf = tmp_path / "pip.conf"
    ctx = make_ctx(configs=[(conf, f"[global]\nconstraint = {a}\n[install]\nconstraint =\n[download]\nconstraint = /nope\n")])
    assert [p[0] for p in pins(ctx)] == ["torch"]  # an empty [install] value does not override; [download] is not install


def test_broken_pip_config_is_reported(tmp_path):
    a = write(tmp_path / "a.txt", "torch==2.13.0\n")
    bad = tmp_path / "bad.conf"
    good = tmp_path / "good.conf"
    ctx = make_ctx(configs=[(good, f"[global]\nconstraint = {a}\n"), (bad, "constraint = /x\n")])
    assert [p[0] for p in pins(ctx)] == ["torch"]
    [err] = errors(ctx)
    assert err.startswith(f"{bad}: not a valid pip config file: ")


def test_pip_constraint_overrides_pip_config(tmp_path):
    env_file = write(tmp_path / "env.txt", "vllm==0.22.0\n")
    conf_file = write(tmp_path / "conf.txt", "torch<=2.14.1\n")
    configs = [(tmp_path / "pip.conf", f"[global]\nconstraint = {conf_file}\n")]
    assert pins(make_ctx(env={"PIP_CONSTRAINT": str(env_file)}, configs=configs)) == [("vllm", "==0.22.0", "PIP_CONSTRAINT")]
    # an empty PIP_CONSTRAINT is no setting at all
    assert pins(make_ctx(env={"PIP_CONSTRAINT": " "}, configs=configs)) == [("torch", "<=2.14.1", f"pip-config: {tmp_path / 'pip.conf'}")]


def test_cli_files_add_to_pip_sources_and_duplicates_are_listed_once(tmp_path):
    shared = write(tmp_path / "shared.txt", "torch<=2.14.1\n")
    mine = write(tmp_path / "mine.txt", "vllm==0.22.0\n")
    ctx = make_ctx(configs=[(tmp_path / "pip.conf", f"[global]\nconstraint = {shared}\n")], files=[mine, shared])
    assert pins(ctx) == [("torch", "<=2.14.1", f"pip-config: {tmp_path / 'pip.conf'}"), ("vllm", "==0.22.0", "--constraints")]


def test_nothing_anywhere_is_observed_empty():
    ctx = make_ctx()
    assert cons.run(ctx) == {"constraints": []}
    assert errors(ctx) == []


def test_through_the_collector_runner(tmp_path):
    f = write(tmp_path / "c.txt", "nvidia-cutlass-dsl==4.4.2\nnot a requirement at all\n")
    ctx = make_ctx(files=[f])
    facts = run_collectors(ctx, [cons.COLLECTOR])
    assert [c["name"] for c in facts.constraints] == ["nvidia-cutlass-dsl"]
    assert [e["collector"] for e in facts.errors] == ["constraints"]


# ---- pip itself agrees about which config value wins -------------------------------------------------------
def _pip_opens(tmp_path: Path, conf_text: str, env_constraint: str | None = None) -> str:
    """Which constraints file real pip tries to open under this config (all named files are missing)."""
    conf = write(tmp_path / "pip-under-test.conf", conf_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update({"PIP_CONFIG_FILE": str(conf), "XDG_CONFIG_DIRS": str(tmp_path / "no-xdg"), "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if env_constraint is not None:
        env["PIP_CONSTRAINT"] = env_constraint
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "pip"], capture_output=True, text=True, env=env, timeout=120
    )
    for line in (done.stdout + done.stderr).splitlines():
        if "Could not open" in line:
            return line.rsplit("'", 2)[-2]
    return ""


def test_real_pip_agrees_on_precedence(tmp_path):
    conf = "[global]\nconstraint = /nonexistent/GLOBAL.txt\n[install]\nconstraint = /nonexistent/INSTALL.txt\n"
    assert _pip_opens(tmp_path, conf) == "/nonexistent/INSTALL.txt"
    ctx = make_ctx(configs=[(tmp_path / "pip-under-test.conf", conf)])
    assert cons.sources(ctx) == [(f"pip-config: {tmp_path / 'pip-under-test.conf'}", ["/nonexistent/INSTALL.txt"])]
    assert _pip_opens(tmp_path, conf, env_constraint="/nonexistent/ENV.txt") == "/nonexistent/ENV.txt"
    assert cons.sources(make_ctx(env={"PIP_CONSTRAINT": "/nonexistent/ENV.txt"}, configs=[(tmp_path / "x.conf", conf)]))[0][0] == "PIP_CONSTRAINT"
    # pip ignores a `constraints` key: nothing to open
    assert _pip_opens(tmp_path, "[global]\nconstraints = /nonexistent/PLURAL.txt\n") == ""
