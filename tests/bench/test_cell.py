"""`bench --export FILE` and `bench --reproduce FILE` end to end: the real command in a subprocess against the
real local SSE server (tests/bench/sse_server.py); a cell exported on one run and reproduced on another names the
keys that differ; a bad or hostile cell file is one line, exit 2, before anything is measured."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_USAGE
from tests.bench.sse_server import Style, serve

REPO = Path(__file__).resolve().parents[2]
QUICK = ["--rounds", "2", "--concurrency", "1,2", "--max-tokens", "8", "--warmup", "1", "--no-correctness"]


@pytest.fixture
def run(tmp_path):
    base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR") and not k.startswith("VLLM_")}
    base.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
                SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")

    def call(*args, env=None, timeout=180):
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=tmp_path,
                              env={**base, **(env or {})}, capture_output=True, text=True, timeout=timeout)

    return call


def test_a_cell_exported_on_one_run_and_reproduced_on_another_names_what_differs(run, tmp_path):
    cell_file, ledger = tmp_path / "cell.json", tmp_path / "ledger.sqlite"
    with serve(Style(delay=0.001)) as (url, _):
        exported = run("bench", "--url", url, *QUICK, "--ledger", ledger, "--export", cell_file, "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["exported"] == str(cell_file)
    cell = json.loads(cell_file.read_text())
    assert (cell["cell"], cell["cell_version"], len(cell["config_hash"])) == ("sparkdoctor bench cell", 1, 16)
    assert cell["model"]["name"] == "tiny" and cell["run_id"] == 1  # the ledger's stored run
    assert cell["toolchain"]["fingerprint"] == json.loads(exported.stdout)["fingerprint"]
    assert "packages" in cell["toolchain"]["material"] and cell["toolchain"]["facts"]["schema"] == 1
    assert cell["workload"]["max_tokens"] == 8 and [lvl["concurrency"] for lvl in cell["numbers"]["levels"]] == [1, 2]
    assert cell["machine"]["load"]["before"]["mem_available_mib"] > 0

    # another server (another model name), another env var, one workload setting changed on the command line:
    # the cell's other workload settings are used (rounds 2, concurrency 1,2), and each difference is named
    with serve(Style(delay=0.001, model="tiny-2")) as (url, _):
        again = run("bench", "--url", url, "--reproduce", cell_file, "--max-tokens", "6", "--no-correctness",
                    "--no-store", "--format", "json", env={"VLLM_REPRO_TEST": "1"})
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["kind"] == "reproduce" and doc["cell"] == str(cell_file) and not doc["same_config"]
    assert doc["run"]["workload"]["rounds"] == 2 and doc["run"]["workload"]["concurrency"] == [1, 2]
    keys = {(row["group"], row["key"]): (row["there"], row["here"]) for row in doc["differences"]}
    assert keys[("toolchain", "toolchain.env.VLLM_REPRO_TEST")] == ("(absent)", "1")
    assert keys[("model", "model.name")] == ("tiny", "tiny-2")
    assert not [key for key in keys if key[0] == "recipe"]  # a --url run's port and model are not recipe settings
    assert keys[("workload", "workload.max_tokens")] == (8, 6)
    assert {"toolchain", "model", "workload"} <= set(doc["likely_causes"])
    assert {row["concurrency"] for row in doc["numbers"]} == {1, 2} and doc["headline"]["a"] > 0

    console = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", cell_file, "--no-store")
    assert console.returncode == 4  # the server cannot be reached: bench's own code, after the cell was read

    with serve(Style(delay=0.001)) as (url, _):
        same = run("bench", "--url", url, "--reproduce", cell_file, "--no-correctness", "--no-store")
    assert same.returncode == 0, same.stderr
    assert "reproducing" in same.stdout and "(the same configuration)" in same.stdout, same.stdout[-3000:]
    assert "here/there" in same.stdout


@pytest.mark.parametrize("content, why", [
    (b"", "not valid JSON"),
    (b"\xff\xfe not text", "not UTF-8"),
    (b"[1, 2]", "not a bench cell"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply to read"),
    (json.dumps({"cell": "sparkdoctor bench cell", "cell_version": 99}).encode(), "newer than this sparkdoctor"),
    (json.dumps({"cell": "sparkdoctor bench cell", "cell_version": "1"}).encode(), "cell_version"),
    (json.dumps({"cell": "sparkdoctor bench cell", "cell_version": 1, "recipe": {}}).encode(), "toolchain is missing"),
], ids=["empty", "binary", "a-list", "deep", "newer", "version-text", "no-toolchain"])
def test_a_bad_cell_file_is_one_line_before_anything_runs(run, tmp_path, content, why):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", bad, "--no-store")
    assert out.returncode == EXIT_USAGE and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and why in out.stderr and "Traceback" not in out.stderr


def test_hostile_cell_files_are_refused_in_one_line(run, tmp_path):
    fifo, huge, folder = tmp_path / "fifo", tmp_path / "huge.json", tmp_path / "folder"
    os.mkfifo(fifo)  # no writer: refused at once, never waited on
    with huge.open("wb") as fh:  # sparse: larger than a cell may be, without using the disk
        fh.truncate(64 * 2**20)
    folder.mkdir()
    for path, why in ((fifo, "FIFO"), (huge, "larger than"), (folder, "directory"), (tmp_path / "none", "No such")):
        out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", path, "--no-store", "--format", "json", timeout=60)
        assert out.returncode == EXIT_USAGE, (path, out.stderr)
        assert json.loads(out.stdout)["errors"][0]["code"] == "bad-cell" and why in out.stderr, out.stderr


MINIMAL = {"cell": "sparkdoctor bench cell", "cell_version": 1, "recipe": {}, "toolchain": {"facts": {}}, "model": {},
           "machine": {}, "numbers": {"levels": []}, "workload": {}}


@pytest.mark.parametrize("section, key, value", [
    ("model", "identity", "abc"), ("toolchain", "material", [1]), ("numbers", "headline", "x"), ("machine", "load", 5),
    ("machine", "cpus", True), ("toolchain", "fingerprint", 7), (None, "config_hash", {}),
])
def test_a_cell_with_a_key_of_the_wrong_type_is_named(run, tmp_path, section, key, value):
    bad = tmp_path / "cell.json"
    cell = json.loads(json.dumps(MINIMAL))
    (cell[section] if section else cell)[key] = value
    bad.write_text(json.dumps(cell))
    out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", bad, "--no-store")
    assert out.returncode == EXIT_USAGE and key in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_minimal_cell_is_read_and_the_run_goes_on(run, tmp_path):
    """Nothing but the required keys: read, then the server is tried (not there: bench's exit 4, not a bad cell)."""
    good = tmp_path / "cell.json"
    good.write_text(json.dumps(MINIMAL))
    out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", good, "--no-store")
    assert out.returncode == 4 and "cell" not in out.stderr, out.stderr


def test_a_cell_with_a_bad_workload_or_an_edit_is_named(run, tmp_path):
    bad = tmp_path / "cell.json"
    cell = {"cell": "sparkdoctor bench cell", "cell_version": 1, "recipe": {}, "toolchain": {"facts": {}},
            "model": {}, "machine": {}, "numbers": {"levels": []}, "workload": {"max_tokens": 0}}
    bad.write_text(json.dumps(cell))
    out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", bad, "--no-store")
    assert out.returncode == EXIT_USAGE and "max_tokens" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("workload, why", [
    ({"prompt_words": 10**9}, "prompt_words"), ({"concurrency": [1, 1000000]}, "concurrency"),
    ({"rounds": 10**15}, "rounds"), ({"warmup": 10**15}, "warmup"), ({"max_tokens": True}, "max_tokens"),
    ({"concurrency": list(range(1, 1001))}, "concurrency"), ({"prompt_words": 100000, "concurrency": [4096]}, "at once"),
    ({"request_timeout": float("inf")}, "request_timeout"), ({"request_timeout": True}, "request_timeout"),
])
def test_a_cell_whose_workload_would_exhaust_this_machine_is_refused(run, tmp_path, workload, why):
    """A cell is someone else's file: a billion-word prompt, a million requests at once or an endless wait is one
    line and exit 2 before anything runs (it was accepted, and reached the server: exit 4 here)."""
    bad = tmp_path / "cell.json"
    bad.write_text(json.dumps({**MINIMAL, "workload": workload}))
    out = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", bad, "--no-store", "--format", "json", timeout=60)
    assert out.returncode == EXIT_USAGE and why in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert json.loads(out.stdout)["exit_code"] == EXIT_USAGE


def test_the_command_line_workload_has_the_same_bounds(run):
    out = run("bench", "--url", "http://127.0.0.1:9", "--concurrency", "1,100000", "--no-store", timeout=60)
    assert out.returncode == EXIT_USAGE and "concurrency" in out.stderr, out.stderr


def test_export_and_reproduce_refuse_an_ab_and_a_missing_folder(run, tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('name = "r"\ncommand = ["true"]\n')
    out = run("bench", recipe, "--vs", recipe, "--export", tmp_path / "c.json")
    assert out.returncode == EXIT_USAGE and "not an A/B" in out.stderr
    out = run("bench", "--url", "http://127.0.0.1:9", "--export", tmp_path / "no" / "c.json")
    assert out.returncode == EXIT_USAGE and "does not exist" in out.stderr
    out = run("bench", "--reproduce", tmp_path / "c.json")
    assert out.returncode == EXIT_USAGE and "give the RECIPE" in out.stderr
    os.mkfifo(tmp_path / "fifo")
    for path in (tmp_path, tmp_path / "fifo"):  # refused before anything is measured, never opened
        out = run("bench", "--url", "http://127.0.0.1:9", "--export", path, timeout=60)
        assert out.returncode == EXIT_USAGE and "not a regular file" in out.stderr, out.stderr


def test_a_recipe_cell_reproduced_with_another_env_names_the_recipe_key(run, tmp_path):
    """RECIPE runs: the real launcher starts tests/bench/sse_server.py; the cell's workload wins over the recipe's
    own table, and a recipe setting changed with --set is named in the recipe group."""
    from tests.bench.test_bench_recipe import recipe

    r = recipe(tmp_path, "fast", "--delay", "0.002", workload="[workload]\nmax_tokens = 16\nrepeats = 3\n")
    cell_file = tmp_path / "cell.json"
    out = run("bench", r, "--concurrency", "1", "--rounds", "2", "--warmup", "0", "--no-correctness", "--no-store",
              "--ready-timeout", "60", "--export", cell_file)
    assert out.returncode == 0, out.stderr
    cell = json.loads(cell_file.read_text())
    assert cell["recipe"]["name"] == "fast" and cell["recipe"]["fingerprint"] and cell["run_id"] is None
    again = run("bench", r, "--reproduce", cell_file, "--set", "env.SSE_TEST_KNOB=1", "--no-correctness",
                "--no-store", "--ready-timeout", "60", "--format", "json")
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["run"]["workload"]["rounds"] == 2 and doc["run"]["workload"]["max_tokens"] == 16  # the cell's
    keys = {(row["group"], row["key"]): (row["there"], row["here"]) for row in doc["differences"]}
    assert keys[("recipe", "recipe.env.SSE_TEST_KNOB")] == ("(absent)", "1")
    assert ("recipe", "recipe.fingerprint") in keys and "recipe" in doc["likely_causes"] and not doc["same_config"]


def test_a_run_not_stored_has_the_shape_of_a_stored_one(tmp_path):
    """--export --no-store writes its cell from RunRecord.as_stored(): the same keys and values Ledger.run() reads
    back once the run is stored (tuples as JSON lists), so a cell never depends on whether the run was stored."""
    from sparkdoctor.ledger import Ledger, RunRecord

    record = RunRecord(recipe={"name": "r", "argv": ["x"], "env": {}}, base_url="http://127.0.0.1:1", model="m",
                       server={"kind": "vllm"}, facts={"schema": 1}, fingerprint="f" * 16, bench_version=3,
                       tool_version="1", workload={"concurrency": (1, 2)}, summary={"levels": [], "headline": None},
                       samples=[(1, 0, 0, {"ttft_s": 0.1})])
    with Ledger(tmp_path / "l.sqlite") as ledger:
        run_id = ledger.add_run(record)
        stored = ledger.run(run_id)
    assert stored is not None
    unstored = record.as_stored(run_id)
    assert set(unstored) == set(stored)
    assert {k: v for k, v in unstored.items() if k != "created_at"} == {k: v for k, v in stored.items() if k != "created_at"}
