"""`bench --reproduce FILE` on results published by other harnesses: a real llama-benchy 0.4.0 JSON report, a real
sparkrun 0.4.2 benchmark export and a Spark Arena submission's files written by sparkrun 0.4.2's own code
(tests/data/bench-imports/README.md says how each was made), read as cells,
rerun here against the real local SSE server and compared key by key over what each file has; and, slow, the
llama-benchy from PyPI run against that server, its report reproduced at once."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.bench import cell as cells
from sparkdoctor.bench import imported
from sparkdoctor.exitcodes import EXIT_USAGE
from tests import venvs
from tests.bench.sse_server import Style, serve

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "bench-imports"
LLAMA_BENCHY = DATA / "llama-benchy-0.4.0.json"
SPARKRUN = DATA / "sparkrun-0.4.2-export.yaml"
ARENA = DATA / "spark-arena" / "metadata.json"


@pytest.fixture
def run(tmp_path):
    base = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR") and not k.startswith("VLLM_")}
    base.update(PYTHONPATH=str(REPO), SPARKDOCTOR_STATE_DIR=str(tmp_path / "state"),
                SPARKDOCTOR_CACHE_DIR=str(tmp_path / "cache"), COLUMNS="160")

    def call(*args, timeout=180):
        return subprocess.run([sys.executable, "-m", "sparkdoctor", *map(str, args)], cwd=tmp_path, env=base,
                              capture_output=True, text=True, timeout=timeout)

    return call


def test_a_llama_benchy_report_is_a_cell_of_what_it_has():
    report = json.loads(LLAMA_BENCHY.read_text())
    cell = cells.read(LLAMA_BENCHY)
    assert cell["cell"] == cells.CELL and cell["config_hash"] == cells.config_hash(cell)
    assert cell["imported"]["from"] == "llama-benchy" and cell["imported"]["harness"] == "llama-benchy 0.4.0"
    assert cell["model"]["name"] == report["model"] == "tiny"
    # the first size (pp 100, tg 16) at both concurrencies; the pp 200 rows are kept out and counted
    assert cell["workload"] == {"api": "chat", "max_tokens": 16, "prompt_words": 100, "concurrency": [1, 2], "rounds": 3}
    assert cell["imported"]["rows_not_compared"] == 2
    rows = {r["concurrency"]: r for r in report["benchmarks"] if r["prompt_size"] == 100}
    for level in cell["numbers"]["levels"]:
        assert level["headline"]["decode_tps_per_stream"] == rows[level["concurrency"]]["tg_req_throughput"]["mean"]
        assert level["llama_benchy"]["e2e_ttft"] == rows[level["concurrency"]]["e2e_ttft"]["mean"]
    assert cell["numbers"]["headline"]["concurrency"] == 1
    assert {"engine and versions", "recipe", "model identity"} <= set(cell["imported"]["lacks"])
    line = imported.lacks_line(cell)
    assert line.startswith("imported from a llama-benchy result (llama-benchy 0.4.0); not in it, so not compared: ")
    assert "2 row(s) of other sizes" in line


def test_a_sparkrun_export_adds_the_recipe_the_model_and_the_engine_versions():
    cell = cells.read(SPARKRUN)
    assert cell["imported"]["from"] == "sparkrun" and cell["imported"]["harness"] == "llama-benchy 0.4.0"
    assert cell["recipe"]["name"] == "tiny-sparkrun" and cell["model"]["name"] == "/models/tiny"
    assert cell["imported"]["versions"]["vllm"] == "0.32.0" and "engine and versions" not in cell["imported"]["lacks"]
    same = cells.read(LLAMA_BENCHY)
    assert cell["numbers"]["levels"] == same["numbers"]["levels"]  # its results.json is the same report
    facts = {"packages": {"vllm": {"version": "0.31.0"}, "torch": {"version": "2.11.0+cu130"}}}
    assert imported.toolchain_rows(cell, facts) == [
        {"group": "toolchain", "key": "toolchain.packages.vllm", "there": "0.32.0", "here": "0.31.0"}]


def test_a_spark_arena_submission_is_read_from_its_metadata_and_csv():
    cell = cells.read(ARENA)
    assert cell["imported"]["from"] == "spark-arena" and cell["imported"]["versions"]["vllm"] == "0.32.0"
    assert cell["imported"]["harness"] == "llama-benchy (its version is not recorded)"
    assert cell["recipe"]["name"] == "tiny-sparkrun" and cell["model"]["name"] == "/models/tiny"
    same = cells.read(LLAMA_BENCHY)  # its CSV was made from that report: the same levels and workload
    assert cell["workload"] == same["workload"]
    assert [lvl["headline"] for lvl in cell["numbers"]["levels"]] == [lvl["headline"] for lvl in same["numbers"]["levels"]]
    assert cell["imported"]["rows_not_compared"] == 2


def test_a_csv_generation_row_takes_its_prompt_size_from_the_row_before_or_the_only_one_named():
    text = (ARENA.parent / "benchmark.csv").read_text()
    rows = imported.csv_rows(text, {"pp": [100, 200]})
    # pp100 c1, pp100 c2, then a tg row whose pp row llama-benchy left out (no pp figure), then pp200 c2
    assert [(r["pp"], r["tg"], r["concurrency"]) for r in rows] == [(100, 16, 1), (100, 16, 2), (None, 16, 1), (200, 16, 2)]
    alone = [line for line in text.splitlines() if not line.startswith("tiny,pp")]
    assert {r["pp"] for r in imported.csv_rows("\n".join(alone), {"pp": 100})} == {100}
    assert {r["pp"] for r in imported.csv_rows("\n".join(alone), {})} == {None}


def test_a_submission_without_its_csv_is_one_line(run, tmp_path):
    (tmp_path / "metadata.json").write_text(ARENA.read_text())
    done = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", tmp_path / "metadata.json")
    assert done.returncode == EXIT_USAGE and "with the benchmark.csv beside it" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_llama_benchy_report_reproduced_here_names_what_differs(run):
    with serve(Style(delay=0.001)) as (url, _):
        done = run("bench", "--url", url, "--reproduce", LLAMA_BENCHY, "--no-correctness", "--no-store",
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "reproduce" and doc["imported"]["harness"] == "llama-benchy 0.4.0"
    assert doc["run"]["workload"]["max_tokens"] == 16 and doc["run"]["workload"]["concurrency"] == [1, 2]
    assert doc["notes"][0] == imported.lacks_line(cells.read(LLAMA_BENCHY))
    assert [r["key"] for r in doc["differences"]] == ["harness"] and doc["likely_causes"] == ["bench"]
    heads = [r for r in doc["numbers"] if r["figure"].endswith("(headline)")]
    assert [r["concurrency"] for r in heads] == [1, 2] and all(r["a"] > 0 and r["b"] > 0 and r["ratio"] is None
                                                                for r in heads)
    assert doc["headline"]["concurrency"] == 1


@pytest.mark.parametrize("published", [SPARKRUN, ARENA], ids=["sparkrun-export", "spark-arena-submission"])
def test_a_sparkrun_result_reproduced_here_names_model_engine_and_recipe(run, published):
    with serve(Style(delay=0.001)) as (url, _):
        done = run("bench", "--url", url, "--reproduce", published, "--max-tokens", "8", "--no-correctness",
                   "--no-store", "--format", "json")
        console = run("bench", "--url", url, "--reproduce", published, "--no-correctness", "--no-store")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    keys = {(r["group"], r["key"]): (r["there"], r["here"]) for r in doc["differences"]}
    harness = "llama-benchy 0.4.0" if published == SPARKRUN else "llama-benchy (its version is not recorded)"
    assert keys == {("bench", "harness"): (harness, "sparkdoctor bench 1"),
                    ("toolchain", "toolchain.packages.vllm"): ("0.32.0", "(absent)"),
                    ("toolchain", "toolchain.packages.torch"): ("2.11.0+cu130", "(absent)"),
                    ("model", "model.name"): ("/models/tiny", "tiny"),
                    ("recipe", "recipe.name"): ("tiny-sparkrun", None),  # a --url run has no recipe
                    ("workload", "workload.max_tokens"): (16, 8)}
    assert doc["likely_causes"] == ["bench", "toolchain", "model", "recipe", "workload"]
    assert console.returncode == 0, console.stderr
    text = " ".join(console.stdout.split())
    kind = "sparkrun" if published == SPARKRUN else "spark-arena"
    assert f"note: imported from a {kind} result ({harness}); not in it, so not compared: " in text
    assert "headline decode tok/s/stream at conc 1: " in text


@pytest.mark.parametrize("content, why", [
    ({"sparkrun_benchmark": {"benchmark": {"framework": "tool-eval-bench"}, "results": {"json": {}}}},
     "a sparkrun result whose benchmark is not llama-benchy's (framework 'tool-eval-bench')"),
    ({"version": "0.4.0", "model": "m", "benchmarks": [{"concurrency": 1, "context_size": 4096, "prompt_size": 1,
                                                         "response_size": 1}]},
     "no generation row at context depth 0"),
    ({"version": "0.4.0", "model": "m", "benchmarks": [{"concurrency": 1, "prompt_size": "2k", "response_size": 1}]},
     "prompt_size '2k', not a whole number"),
])
def test_an_import_its_fields_cannot_make_a_cell_of_is_one_line_before_anything_runs(run, tmp_path, content, why):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(content))
    done = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", path)
    assert done.returncode == EXIT_USAGE and why in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_sparkrun_yaml_that_is_not_yaml_is_one_line(run, tmp_path):
    path = tmp_path / "export.yaml"
    path.write_text("sparkrun_benchmark:\n  version: '1\n  x: [\n")
    done = run("bench", "--url", "http://127.0.0.1:9", "--reproduce", path)
    assert done.returncode == EXIT_USAGE and "not valid YAML" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


BOOK_URL = "https://www.gutenberg.org/files/1661/1661-0.txt"  # llama-benchy's default book, cached by the md5 of its URL


@pytest.mark.slow
def test_real_llama_benchy_against_the_sse_server_is_reproduced(run, tmp_path):
    """llama-benchy 0.4.0 from PyPI in a venv of its own, offline: a word-level tokenizer built with its own
    `tokenizers`, sparkdoctor's prompt prose in its book cache; its report read by `bench --reproduce`."""
    python = venvs.shared_venv("llama-benchy-0.4.0", ["llama-benchy==0.4.0"])
    home = tmp_path / "home"
    (home / ".cache" / "llama-benchy").mkdir(parents=True)
    book = (REPO / "sparkdoctor" / "bench" / "texts" / "public_domain.txt").read_text()
    (home / ".cache" / "llama-benchy" / f"{hashlib.md5(BOOK_URL.encode()).hexdigest()}.txt").write_text(book)
    tokenizer = tmp_path / "tokenizer.json"
    subprocess.run([str(python), "-c", MAKE_TOKENIZER, str(tokenizer)], input=book, text=True, check=True, timeout=120)
    report = tmp_path / "report.json"
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1"}
    with serve(Style(delay=0.001)) as (url, _):
        bench = subprocess.run([str(Path(python).parent / "llama-benchy"), "--base-url", f"{url}/v1", "--model", "tiny",
                                "--tokenizer", str(tokenizer), "--pp", "64", "--tg", "8", "--concurrency", "1", "2",
                                "--runs", "2", "--no-warmup", "--no-adapt-prompt", "--skip-coherence", "--format", "json",
                                "--save-result", str(report)], env=env, capture_output=True, text=True, timeout=300)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        done = run("bench", "--url", url, "--reproduce", report, "--no-correctness", "--no-store", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["imported"]["harness"] == "llama-benchy 0.4.0"
    assert doc["run"]["workload"] == {**doc["run"]["workload"], "max_tokens": 8, "prompt_words": 64, "rounds": 2,
                                      "concurrency": [1, 2]}
    assert [r["key"] for r in doc["differences"]] == ["harness"]


MAKE_TOKENIZER = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
vocab = {"<unk>": 0}
for word in sys.stdin.read().split():
    vocab.setdefault(word, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(sys.argv[1])
"""
