"""`sparkdoctor bench RECIPE` and `--vs` end to end, fast: the real launcher starts a real streaming server
process (tests/bench/sse_server.py) from a recipe, the bench measures it, the ledger stores it. The A/B arms
really differ (a token every 2 ms vs every 12 ms), and A vs A must come out "no difference"."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.exitcodes import EXIT_BENCH_FAILED, EXIT_LEDGER, EXIT_USAGE

REPO = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "sse_server.py"
QUICK = ["--rounds", "3", "--concurrency", "1", "--max-tokens", "24", "--warmup", "1", "--ready-timeout", "60"]


def recipe(tmp_path: Path, name: str, *extra: str, workload: str = "") -> Path:
    argv = [sys.executable, str(SERVER), "--host", "0.0.0.0", "--port", "8000", *extra]
    path = tmp_path / f"{name}.toml"
    path.write_text(f'schema = 1\nname = "{name}"\nmodel = "tiny"\nserved_model_name = "tiny"\n'
                    f"command = {json.dumps(argv)}\nreadiness_path = \"/v1/models\"\n"
                    '[env]\nPYTHONPATH = "' + str(REPO) + '"\n' + workload)
    return path


@pytest.fixture
def run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
               SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")
    ledger = tmp_path / "l.sqlite"

    def call(*args, timeout=300):
        extra = ["--ledger", str(ledger)] if args[0] in ("bench", "history") else []
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args), *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=timeout)

    return call


def test_bench_recipe_launches_measures_stores_and_tears_down(run, tmp_path):
    r = recipe(tmp_path, "fast", "--delay", "0.002", workload="[workload]\nmax_tokens = 16\nrepeats = 2\n")
    out = run("bench", r, "--concurrency", "1,2", "--warmup", "1", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["recipe"]["name"] == "fast" and doc["recipe"]["fingerprint"]
    assert "--port" in doc["recipe"]["argv"] and "8000" not in doc["recipe"]["argv"]  # as it ran: the launcher's port
    assert doc["levels"][0]["client"]["output_tokens"] == 16 and doc["levels"][0]["rounds"] == 2  # the recipe's workload
    assert doc["headline"]["source"].startswith("client")  # the stand-in's /metrics has no histograms
    again = run("bench", r, "--concurrency", "1", "--warmup", "0", "--format", "json")
    cmp = json.loads(run("history", "--compare", "1", "--compare", "2", "--format", "json").stdout)
    assert cmp["comparable"] and not any("different recipes" in n for n in cmp["notes"])  # same recipe, other port
    assert any("different workloads" in n for n in cmp["notes"])
    assert again.returncode == 0


def test_the_servers_memory_through_the_measured_run_is_stored_with_the_run(run, tmp_path):
    """The server takes 150 MiB more at its first request, after it was ready: the high-water mark stored with the
    run holds them (memory is sampled through the measured run, not only while the server starts), and `history`
    lists and shows it."""
    r = recipe(tmp_path, "grows", "--hold-mib", "150")
    out = run("bench", r, "--concurrency", "1", "--warmup", "1", "--rounds", "2", "--max-tokens", "8", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    memory = doc["memory"]
    assert memory["high_water_bytes"] >= 150 * 2**20, memory
    assert memory["high_water_at_s"] > memory["series"][0][0] and memory["samples_taken"] >= 2
    assert memory["processes"] == 2  # the supervisor and the server
    listed = json.loads(run("history", "--format", "json").stdout)["runs"][0]
    assert listed["memory_high_water_bytes"] == memory["high_water_bytes"]
    stored = json.loads(run("history", str(doc["run_id"]), "--format", "json").stdout)["run"]["memory"]
    assert stored == memory
    gib = f"{memory['high_water_bytes'] / 2**30:.2f} GiB"
    assert "peak memory" in run("history").stdout and gib in run("history").stdout
    assert f"server memory: high-water mark {gib} resident" in run("history", str(doc["run_id"])).stdout


@pytest.mark.alone  # the verdict compares real token timings
def test_ab_finds_the_slower_arm_and_stores_both(run, tmp_path):
    a = recipe(tmp_path, "fast", "--delay", "0.002")
    b = recipe(tmp_path, "slow", "--delay", "0.012")
    # a 6x difference in delay: what another job on the machine does to one arm cannot hide it, so the verdict is
    # called whatever the load (the load rule itself: tests/bench/test_load_and_behind.py)
    out = run("bench", a, "--vs", b, "--pairs", "3", *QUICK, "--format", "json", "--allow-load-difference")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["order"] == ["A", "B", "B", "A", "A", "B"] and len(doc["runs"]) == 6
    level = doc["levels"][0]
    assert level["ratio"]["method"] == "paired-t" and level["ratio"]["verdict"] == "slower", level
    assert doc["verdict"] == "slower"
    runs = json.loads(run("history", "--format", "json").stdout)["runs"]
    assert sorted((r["arm"], r["recipe_name"]) for r in runs) == [("A", "fast")] * 3 + [("B", "slow")] * 3
    assert {r["comparison_id"] for r in runs} == {doc["comparison_id"]}
    console = run("bench", a, "--vs", b, "--pairs", "1", *QUICK, "--no-store", "--allow-load-difference")
    assert console.returncode == 0 and "slower" in console.stdout and "B/A" in console.stdout


@pytest.mark.alone  # the verdict compares real token timings
def test_a_vs_a_is_no_difference(run, tmp_path):
    a = recipe(tmp_path, "fast", "--delay", "0.003")
    # the arms may see different load from other jobs on the machine (the load rule is tested in
    # test_load_and_behind.py); what must never happen is a difference claimed between one recipe and itself
    out = run("bench", a, "--vs", a, "--pairs", "2", *QUICK, "--format", "json", "--allow-load-difference")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "no difference"


def test_a_server_that_exits_mid_bench_is_one_line_and_nothing_is_stored(run, tmp_path):
    r = recipe(tmp_path, "crashy", "--delay", "0.001", "--exit-after", "3")
    out = run("bench", r, *QUICK)
    assert out.returncode == EXIT_BENCH_FAILED
    assert out.stderr.count("\n") == 1 and "exited with status 7" in out.stderr and "while it was serving" in out.stderr
    assert "exiting on purpose mid-bench" in out.stderr  # the log's last line
    history = run("history", "--format", "json")  # a failed run creates no ledger
    assert history.returncode == EXIT_LEDGER and "no such file" in json.loads(history.stdout)["errors"][0]["message"]


def test_bad_recipes_are_one_line(run, tmp_path):
    missing = tmp_path / "nocmd.toml"
    missing.write_text('schema = 1\nname = "x"\n')
    out = run("bench", missing)
    assert out.returncode == EXIT_USAGE and "command" in out.stderr and out.stderr.count("\n") == 1
    bad_workload = recipe(tmp_path, "badwl", workload="[workload]\nrepeatz = 3\n")
    out = run("bench", bad_workload)
    assert out.returncode == EXIT_USAGE and "badwl.toml" in out.stderr and "repeatz" in out.stderr
    unknown = recipe(tmp_path, "tpl", "--delay", "{nope}")
    out = run("bench", unknown)
    assert out.returncode == EXIT_USAGE and "nope" in out.stderr and out.stderr.count("\n") == 1


def test_calibrate_measures_the_launch_noise_of_one_recipe_against_itself(run, tmp_path):
    path = recipe(tmp_path, "aa", "--delay", "0.002")
    out = run("bench", path, "--calibrate", "--pairs", "2", "--concurrency", "1", "--rounds", "2", "--max-tokens", "8",
              "--warmup", "1", "--no-correctness", "--ledger", tmp_path / "l.sqlite", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "calibration" and doc["order"] == ["A", "B", "B", "A"] and len(doc["runs"]) == 4
    (lvl,) = doc["calibration"]
    assert lvl["launch_cv"] is not None and lvl["launch_cv"] >= 0
    # one pair: what a one-pair A/B with this calibration (1 degree of freedom here) detects
    assert lvl["mde"]["1"] > lvl["mde"]["3"] > lvl["mde"]["5"] > lvl["mde"]["10"] > 0
    console = run("bench", path, "--calibrate", "--pairs", "2", "--concurrency", "1", "--rounds", "2", "--max-tokens", "8",
                  "--warmup", "1", "--no-correctness")
    assert console.returncode == 0 and "launch-to-launch noise" in console.stdout and "10 pairs" in console.stdout
    bad = run("bench", path, "--calibrate", "--pairs", "1")
    assert bad.returncode == 2 and "2 pairs or more" in bad.stderr


def test_a_one_pair_ab_takes_its_interval_from_a_stored_calibration_of_the_same_toolchain(run, tmp_path):
    a = recipe(tmp_path, "cal-a", "--delay", "0.002")
    b = recipe(tmp_path, "cal-b", "--delay", "0.004")
    # the machine's load comes and goes with other jobs: a calibration taken under other load than the A/B is
    # passed over unless allowed (tests/bench/test_stats.py tests that rule)
    quick = ["--concurrency", "1", "--rounds", "2", "--max-tokens", "8", "--warmup", "1", "--no-correctness",
             "--allow-load-difference", "--format", "json"]
    before = json.loads(run("bench", a, "--vs", b, "--pairs", "1", *quick).stdout)
    assert before["levels"][0]["ratio"]["method"] == "bootstrap-rounds"  # no calibration yet
    cal = run("bench", a, "--calibrate", "--pairs", "2", *quick)
    assert cal.returncode == 0, cal.stderr
    cal_id = json.loads(cal.stdout)["comparison_id"]
    after = json.loads(run("bench", a, "--vs", b, "--pairs", "1", *quick).stdout)
    ratio = after["levels"][0]["ratio"]
    assert ratio["method"] == "one pair + calibrated launch noise" and ratio["calibration"]["comparison_id"] == cal_id
    assert ratio["ci_low"] < ratio["ratio"] < ratio["ci_high"]
    # the verdict stands on the calibration's noise: it prints that noise and the MDE it allows
    noise = after["levels"][0]["noise"]
    assert noise["from"] == f"calibration {cal_id}" and noise["mde"] > 0 and noise["launch_cv"] == ratio["calibration"]["launch_cv"]
    # a later one-pair A/A of the recipe (which measures no launch noise) does not hide the calibration
    aa = run("bench", a, "--vs", a, "--pairs", "1", *quick)
    assert aa.returncode == 0, aa.stderr
    again = json.loads(run("bench", a, "--vs", b, "--pairs", "1", *quick).stdout)
    assert again["levels"][0]["ratio"]["calibration"]["comparison_id"] == cal_id
    console = run("bench", a, "--vs", b, "--pairs", "1", *quick[:-2])
    assert f"from calibration {cal_id}" in console.stdout and "only a 1.5x" not in console.stdout


def test_a_state_folder_that_cannot_take_the_run_folder_is_one_line_before_any_launch(run, tmp_path):
    """The server's log goes to a run folder in the state folder: one that cannot be made there (a read-only home, a
    file in the way) was an internal error (exit 2, `OSError`). Now it is one line, exit 4, and nothing is launched."""
    (tmp_path / "state").write_text("a file where the state folder should be\n")
    r = recipe(tmp_path, "nofolder", "--delay", "0.002")
    out = run("bench", r, *QUICK, "--no-store", "--format", "json")
    doc = json.loads(out.stdout)
    assert out.returncode == EXIT_BENCH_FAILED and doc["errors"][0]["type"] == "RunFailed", out.stderr
    assert "cannot make the run folder" in out.stderr and "nothing was launched" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_a_python_whose_toolchain_cannot_be_read_is_bad_input_not_a_stored_run(run, tmp_path):
    """`--python P` where P crashes (or is no Python): the run was measured and stored under the fingerprint of an
    empty toolchain, the same as a real venv with nothing tracked in it, so it passed for one. It is exit 2 (README:
    "a --python that is no interpreter"), one line, before anything is launched or sent."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nkill -SEGV $$\n")
    python.chmod(0o755)
    for args in (["--url", "http://127.0.0.1:9"], [recipe(tmp_path, "unread", "--delay", "0.002")]):
        out = run("bench", *args, "--python", python, *QUICK, "--format", "json")
        assert out.returncode == EXIT_USAGE and json.loads(out.stdout)["errors"][0]["type"] == "ToolchainUnreadable", out.stderr
        assert "could not be read" in out.stderr and "nothing was launched or measured" in out.stderr
    assert not (tmp_path / "state" / "runs").exists()  # no server launched: no run folder


def test_an_output_file_that_cannot_be_written_is_refused_before_the_launch(run, tmp_path):
    """`-o FILE` in a folder that does not exist: bench launched the server, measured and stored the run, and only then
    said `--output ...: No such file or directory` (exit 2), the document lost. Now it is refused first, as `fix`
    refuses it: one line, exit 2, no server launched and no run stored."""
    r = recipe(tmp_path, "nooutput", "--delay", "0.002")
    out = run("bench", r, *QUICK, "-o", tmp_path / "no-such-folder" / "bench.json")
    assert out.returncode == EXIT_USAGE and "its folder" in out.stderr and "does not exist" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state" / "runs").exists() and not (tmp_path / "l.sqlite").exists()


def test_calibrate_with_reference_is_refused_before_anything_is_launched(run, tmp_path):
    """--calibrate launches one recipe against itself (an A/A) and --reference marks one run's answers as good:
    together every arm of the A/A stored its answers as the reference, each over the last. Refused like --vs with --reference (exit 2, one
    line), before the recipe is launched (its server would leave the marker)."""
    marker = tmp_path / "launched"
    path = recipe(tmp_path, "aa-ref", "--delay", "0.002")
    path.write_text(path.read_text().replace(f'"{SERVER}"', f'"-c", "open({str(marker)!r}, \'w\')"'))
    assert "open(" in path.read_text()
    out = run("bench", path, "--calibrate", "--pairs", "2", "--reference", *QUICK)
    assert out.returncode == EXIT_USAGE and out.stderr.count("\n") == 1, out.stderr
    assert "--calibrate" in out.stderr and "--reference" in out.stderr, out.stderr
    assert not marker.exists()


def test_a_relative_config_file_is_the_one_beside_the_recipe(run, tmp_path):
    """`--config serve.yaml` in a recipe is read from the recipe's folder by recipe check, audit and the memory
    preflight; the launch started the server in its run folder, where no such file is: it died before it was ready
    (exit 4) wherever the user ran bench."""
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "serve.yaml").write_text("max-model-len: 4096\n")
    r = recipe(tmp_path, "cfg", "--config", "serve.yaml").rename(folder / "cfg.toml")
    out = run("bench", Path("recipes") / r.name, "--rounds", "1", "--concurrency", "1", "--max-tokens", "4",
              "--warmup", "0", "--no-store", "--ready-timeout", "60", "--format", "json")
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout)["recipe"]["argv"]
    assert argv[argv.index("--config") + 1] == str(folder / "serve.yaml"), argv


def test_a_model_folder_that_is_not_here_is_refused_before_the_launch(run, tmp_path):
    """`--set model=/data/typo` launched vLLM, which took the path for a hub id and died 10 s later ("Repo id must be in
    the form ..."), under a post-mortem about memory. It is one line naming the folder, exit 4, before the launch."""
    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    marker = tmp_path / "launched"
    fake = bindir / "vllm"  # a `vllm serve` that only says it was started
    fake.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake.chmod(0o755)
    path = tmp_path / "r.toml"
    path.write_text(f'schema = 1\nname = "r"\nmodel = "x"\ncommand = ["{fake}", "serve", "{{model}}"]\n')
    out = run("bench", path, "--set", f"model={tmp_path / 'typo'}", "--python", sys.executable, *QUICK)
    assert out.returncode == EXIT_BENCH_FAILED, out.stderr
    assert f"the model folder {tmp_path / 'typo'} is not on this machine" in out.stderr, out.stderr
    assert out.stderr.strip().count("\n") == 0 and not marker.exists()
