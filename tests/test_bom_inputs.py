"""A TOML file that begins with a UTF-8 byte-order mark (Notepad and other Windows editors write one) reads as the same
file without it: tomllib refused the mark as "Invalid statement (at line 1, column 1)", exit 2, for a config file, a
`--matrix` file, a recipe and a fix definition alike. YAML recipes already read through it (PyYAML passes it over).

Each file is a real one on disk, read through the CLI in a child held to a CPU-time limit."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

from sparkdoctor.fix import edits

REPO = Path(__file__).resolve().parent.parent
FACTS = REPO / "tests" / "data" / "facts" / "nogpu-clean.json"
BOM = b"\xef\xbb\xbf"


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (60, 60))

    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / "xdg"), "COLUMNS": "200",
           "SPARKDOCTOR_CACHE_DIR": str(cwd / "cache"), "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, preexec_fn=limits, check=False)


def _both(tmp_path: Path, name: str, text: bytes) -> tuple[Path, Path]:
    """The same file twice: as written, and begun with the mark."""
    (tmp_path / "plain").mkdir(exist_ok=True)
    (tmp_path / "marks").mkdir(exist_ok=True)
    (plain := tmp_path / "plain" / name).write_bytes(text)
    (marked := tmp_path / "marks" / name).write_bytes(BOM + text)
    return plain, marked


def _report(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode != 2 and "Invalid statement" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    report.pop("envelope", None)
    return report


def test_a_matrix_file_with_a_byte_order_mark_reads_as_without_it(tmp_path):
    plain, marked = _both(tmp_path, "host.toml", (REPO / "matrix" / "host.toml").read_bytes())
    runs = [_cli("check", "--facts", FACTS, "--matrix", m, "--format", "json", cwd=tmp_path) for m in (plain, marked)]
    assert _report(runs[1])["summary"] == _report(runs[0])["summary"]
    assert runs[1].returncode == runs[0].returncode


def test_a_config_file_with_a_byte_order_mark_is_applied(tmp_path):
    config = b'[check]\nfail_on = "info"\nignore = ["vllm-uma-startup-free-memory"]\n'
    plain, marked = _both(tmp_path, "config.toml", config)
    runs = [_cli("check", "--facts", FACTS, "--config", c, "--format", "json", cwd=tmp_path) for c in (plain, marked)]
    assert _report(runs[1])["fail_on"] == _report(runs[0])["fail_on"] == "info"
    assert runs[1].returncode == runs[0].returncode


def test_a_recipe_with_a_byte_order_mark_is_checked(tmp_path):
    for name, source in (("r.toml", REPO / "recipes" / "tiny-cpu.toml"), ("r.yaml", REPO / "tests/data/recipes/tiny-sparkrun.yaml")):
        plain, marked = _both(tmp_path, name, source.read_bytes())
        runs = [_cli("recipe", "check", r, "--python", sys.executable, cwd=tmp_path) for r in (plain, marked)]
        assert runs[1].returncode == runs[0].returncode != 2, runs[1].stderr
        assert "not valid TOML" not in runs[1].stderr + runs[1].stdout
        assert runs[1].stdout.replace(str(marked), "R") == runs[0].stdout.replace(str(plain), "R")


def test_a_fix_definition_with_a_byte_order_mark_is_validated(tmp_path):
    fixes = tmp_path / "fixes"
    fixes.mkdir()
    for source in sorted((REPO / "fixes").glob("*.toml")):
        (fixes / source.name).write_bytes(BOM + source.read_bytes())
    done = _cli("matrix", "validate", "--fixes", fixes, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("ok: "), done.stdout + done.stderr


def test_a_flag_fix_edits_a_recipe_with_a_byte_order_mark_and_keeps_it():
    text = "\ufeff" + (REPO / "recipes" / "tiny-cpu.toml").read_text()
    edited = edits.add_flag(text, "--enforce-eager", None, "r.toml")
    assert edited.startswith("\ufeff") and '"--enforce-eager"]' in edited
