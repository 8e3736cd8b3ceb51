"""`sparkdoctor explain` and the symptom matcher it shares with the serve log scanner.

The fixtures in tests/data/explain/ are real log lines quoted in the research (vLLM #44740's
negative graph estimate, #36734's Mamba assert, eugr #266's container driver refusal, cutlass #3227's
`_mma` ptxas error, vLLM #42354's NCCL watchdog, FlashInfer's major-version JIT error, torch's GB10
capability warning) inside realistic surrounding lines; one is wrapped mid-word and coloured the
way a terminal paste arrives. Issue 23's cases, each error line quoted verbatim from a public report:
  gb10-no-kernel-image.txt            mmcdermott/MEDS_EIC_AR#163 (SGLang on GB10, PyPI sgl-kernel)
  deepgemm-unsupported-arch.txt       deepseek-ai/DeepGEMM#236, comment of 2026-04-29 (GB10, vLLM nightly)
  deepgemm-unknown-recipe.txt         deepseek-ai/DeepGEMM#324, comment of 2026-06-24 (same abort as vLLM #47130)
  flashinfer-mm-fp4-trtllm.txt        FlashInfer's BackendSupportedError as SM12x reports quote it (flashinfer#2577)
  flashinfer-b12x-dense-gemm-sm121.txt  flashinfer-ai/flashinfer#3180 (the sm_121 dispatch-side check)
  triton-illegal-memory-access.txt    flashinfer#3170's b12x MoE report: a generic Triton error, no one cause
Late 2026 (field-2026-11-28), the error line verbatim, the lines around it realistic:
  vllm-linear-backend-b12x.txt        huggingface.co/unsloth/Qwen3.6-27B-NVFP4 discussion #10
  vllm-unknown-env-mxfp4.txt          spark-arena/recipe-registry#17
  sglang-unbalanced-memory.txt        al-engr.com/minimax-sglang-debug.html (SGLang 0.5.12)
  nvrm-no-memory.txt                  NVIDIA/dgx-spark-playbooks#97 (kernel log of the reset)
  deepgemm-sm121-header.txt           spark-arena/sparkrun#220 (GLM-5.2-NVFP4, 8 Sparks, nightly image)
  nemoclaw-memory-telemetry.txt       NVIDIA/NemoClaw#10082 (NemoClaw v0.0.114's managed-vLLM preflight)
  nccl-ib-cts-unused-request.txt      NVIDIA/nccl#2334 (4x GB10 over RoCE v2, NCCL 2.30.7; the report's line unwrapped)
The matrix is the bundled one: a fixture that stops matching means an
entry's symptom drifted from what the software prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sparkdoctor.matrix import Entry, load
from sparkdoctor.matrix.symptoms import line_hits, match_text, normalise
from sparkdoctor.serve.logscan import match_line

DATA = Path(__file__).resolve().parent / "data" / "explain"
MATRIX = load()

# fixture -> the entries it must explain, each with how it matches
EXPECTED = {
    "vllm-negative-cg-estimate.log": {"vllm-cg-estimate-negative": "exact"},  # forced-on was merged into it
    "torch-gb10-warning-wrapped-ansi.txt": {"torch-cc-121-warning": "tolerant"},
    "container-driver-too-old.txt": {"driver-image-needs-newer-driver": "exact"},
    "mamba-align-assert.log": {"vllm-mamba-align-mnbt": "exact"},
    "cutedsl-mma-ptxas.txt": {"cutedsl-450-libs-base-mma": "exact", "cutedsl-wheel-collision": "exact"},
    # three multi-node causes print these lines (matrix/multinode.toml adds two): explain shows them as ambiguous
    "nccl-watchdog-two-sparks.log": {"nccl-pip-2289-multinode-hang": "exact", "multinode-nccl-build-drift": "exact",
                                     "multinode-nccl-pip-system-split": "exact"},
    "flashinfer-jit-major-10.txt": {"fi-moe-utils-jit-sm12x": "exact"},  # not the toolkit entry's "[12]"
    "vllm-clean-start.log": {},
    # issue 23: a symptom several causes print is ambiguous (test_shared_symptoms_are_ambiguous below)
    "gb10-no-kernel-image.txt": {"torch-cuda-below-128": "exact", "cutedsl-arch-unset": "exact"},
    # one cause in two ranges of releases (0.24.x, 0.27.x): one entry since matrix track showed the same facts
    "deepgemm-unsupported-arch.txt": {"vllm-deep-gemm-gb10": "exact"},
    "deepgemm-unknown-recipe.txt": {"vllm-deep-gemm-gb10": "exact"},
    "flashinfer-mm-fp4-trtllm.txt": {"fi-trtllm-fp4-gemm-sm12x": "exact"},
    "flashinfer-b12x-dense-gemm-sm121.txt": {"fi-b12x-kernel-patched": "exact"},
    "triton-illegal-memory-access.txt": {},  # generic: not pinned on one MoE backend
    # late-2026 GB10 breakages (shared research field-2026-11-28), each error line verbatim from its report
    "vllm-linear-backend-b12x.txt": {"vllm-linear-backend-b12x-fail-fast": "exact"},
    "vllm-unknown-env-mxfp4.txt": {"vllm-env-mxfp4-backend-unknown": "exact"},
    "sglang-unbalanced-memory.txt": {"sglang-unbalanced-memory-after-crash": "exact"},
    "nvrm-no-memory.txt": {"gb10-driver-out-of-unified-memory": "exact"},
    "deepgemm-sm121-header.txt": {"vllm-deepgemm-sm121-header-missing": "exact"},
    "nemoclaw-memory-telemetry.txt": {"nemoclaw-preflight-memory-na": "exact"},
    "nccl-ib-cts-unused-request.txt": {"nccl-ib-cts-unused-request-deadlock": "exact"},
    # GLM-5.3-Flash on a DGX Spark with SGLang 0.5.20 (sglang#40286), the lines verbatim from the report
    "sglang-glm53-flash-trtllm.txt": {"sglang-glm53-flash-sm12x-trtllm-dsa": "exact"},
    # the user-space OOM killers' journal lines, written to their format strings (earlyoom kill.c, systemd oomd-manager.c)
    "earlyoom-kill-journal.txt": {"host-earlyoom-killed": "exact"},
    "systemd-oomd-kill-journal.txt": {"host-systemd-oomd-killed": "exact"},
}


def entry(symptoms: list[str], entry_id: str = "demo", severity: str = "warn") -> Entry:
    return Entry(id=entry_id, title="t", severity=severity, action="configure", summary="s", remedy="r", when={},
                 refs=["https://example.org"], component="demo", file="demo.toml", symptoms=symptoms)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", *args], input=stdin, capture_output=True, timeout=60)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_fixtures_are_explained(name):
    matches = match_text((DATA / name).read_text(encoding="utf-8"), MATRIX.entries)
    assert {m.entry.id: m.how for m in matches} == EXPECTED[name]


def test_every_fixture_is_listed():
    assert {p.name for p in DATA.iterdir()} == set(EXPECTED)


def test_the_wrapped_match_names_the_lines_it_spans():
    [m] = match_text((DATA / "torch-gb10-warning-wrapped-ansi.txt").read_text(), MATRIX.entries)
    assert m.line_no == 3 and "\x1b" not in m.line
    assert m.line == "Minimum and Maximum cuda capability supported by this version of PyTor ch is"


def test_exact_then_tolerant_of_paths_numbers_colour_and_wrapping():
    e = entry(["Free memory on device cuda:0 (12.3/119.7 GiB) on startup is less than desired"])
    line = "\x1b[31mValueError: Free memory on device cuda:0 (100.21/121.69 GiB) on startup is less than desired\x1b[0m"
    [(_, _, how)] = line_hits(line, [e])
    assert how == "tolerant" and match_line(line, [e])[0].line.startswith("ValueError")
    path = entry(["File /opt/venv/lib/python3.12/site-packages/vllm/envs.py is read-only"])
    assert line_hits("File /usr/local/lib/python3.10/dist-packages/vllm/envs.py is read-only", [path])[0][2] == "tolerant"
    assert line_hits("Free memory on device cuda:0 (12.3/119.7 GiB) on startup is less than desired", [e])[0][2] == "exact"


def test_tolerance_never_changes_what_the_symptom_is_about():
    arch = entry(["Instruction 'cvt with .e2m1x2' not supported on .target 'sm_121'"])
    assert not line_hits("Instruction 'cvt with .e2m1x2' not supported on .target 'sm_120'", [arch])
    majors = entry(["No supported CUDA architectures found for major versions [12]"])
    assert not line_hits("No supported CUDA architectures found for major versions [10]", [majors])
    short = entry(["!!!!!!!!"])  # shorter than MIN_TOLERANT once normalised: exact only
    assert line_hits("answer: !!!!!!!!!!!!", [short]) and not line_hits("answer: !!!! !!!!", [short])


def test_one_match_per_entry_counts_repeats_and_skips_withdrawn():
    e = entry(["This kernel only supports sm120."])
    text = "\n".join(["warmup"] + ["This kernel only supports sm120."] * 40)
    [m] = match_text(text, [e])
    assert (m.line_no, m.count) == (2, 40)
    gone = entry(["This kernel only supports sm120."])
    gone.withdrawn = "wrong"
    assert match_text(text, [gone]) == []


def test_normalise_is_what_the_docstring_says():
    assert normalise("\x1b[1mA  b\nC\x1b[0m") == "abc"
    assert normalise("took 600060 ms at /a/b/c.py:12") == "took\x00nmsat\x00p:12"


def test_a_launchers_own_sigterm_echo_is_not_an_earlyoom_kill():
    """earlyoom's kill line is known by the journal's `earlyoom[PID]: ` before it and by the warning before each
    kill; the bare words are what launcher scripts echo before their own kill (tolerant matching folds case)."""
    for line in ("Sending SIGTERM to process 20417...", "[INFO] Sending SIGTERM to process 20417",
                 "container: sending SIGTERM to process group"):
        assert not [m for m in match_text(line, MATRIX.entries) if m.entry.id == "host-earlyoom-killed"], line
    journal = 'earlyoom[1188]: sending SIGTERM to process 20417 uid 1000 "VLLM::EngineCor": badness 912, VmRSS 104233 MiB'
    assert [m.entry.id for m in match_text(journal, MATRIX.entries)] == ["host-earlyoom-killed"]


# earlyoom's kill line bare, as its warn() writes it to stderr (rfjakob/earlyoom kill.c: v1.7 and v1.9.0's format
# strings; msg.c wraps it in yellow on a tty): a terminal, `docker logs` of a container that runs it, a paste
BARE_EARLYOOM = [
    'sending SIGTERM to process 20417 uid 1000 "VLLM::EngineCor": badness 912, VmRSS 104233 MiB',
    '\x1b[33msending SIGKILL to process 4242 uid 0 "python3": oom_score 912, oom_score_adj 0, VmRSS 104233 MiB, '
    'cmdline "python3 -m vllm.entrypoints.openai.api_server"\x1b[0m',
]


@pytest.mark.parametrize("line", BARE_EARLYOOM)
def test_earlyooms_bare_stderr_line_is_an_earlyoom_kill(line):
    assert [m.entry.id for m in match_text(line, MATRIX.entries)] == ["host-earlyoom-killed"], line
    done = subprocess.run([sys.executable, "-m", "sparkdoctor", "explain", "-", "--format", "json"], input=line + "\n",
                          capture_output=True, text=True, timeout=120)
    assert "host-earlyoom-killed" in [m["id"] for m in json.loads(done.stdout)["matches"]], done.stdout[:500]


def test_prose_about_memory_pressure_is_not_an_oomd_kill():
    for line in ("The OS can't just start using them due to memory pressure for example.",
                 "Suppressing readahead due to memory pressure for s3_key='a' with backoff 100ms"):
        assert not match_text(line, MATRIX.entries), line


def test_every_bundled_symptom_finds_its_own_entry():
    """Each symptom string, pasted alone, is explained by the entry that lists it."""
    for e in MATRIX.entries:
        for s in e.symptoms if not e.withdrawn else []:
            assert e.id in [hit[0].id for hit in line_hits(s, MATRIX.entries)], (e.id, s)


# ---- the command --------------------------------------------------------------------------------


def test_explain_file_console_and_exit_code():
    p = run(str(DATA / "mamba-align-assert.log"))
    out = " ".join(p.stdout.decode().split())
    assert p.returncode == 0, p.stderr
    assert "vllm-mamba-align-mnbt" in out and "evidence: checked" in out and "line 4 (exact match)" in out
    assert "--max-num-batched-tokens 4096" in out and "https://github.com/vllm-project/vllm/pull/34445" in out
    assert out.endswith("1 known problem in " + str(DATA / "mamba-align-assert.log") + " (4 lines) · 1 exact, 0 tolerant · evidence: 1 checked")


def test_explain_stdin_json_is_versioned_and_alone_on_stdout():
    p = run("-", "--format", "json", stdin=(DATA / "container-driver-too-old.txt").read_bytes())
    assert p.returncode == 0 and not p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == 1 and doc["source"] == "stdin" and doc["lines"] == 10
    [m] = doc["matches"]
    assert (m["id"], m["match"], m["line_no"], m["evidence"]) == ("driver-image-needs-newer-driver", "exact", 7, "reported")
    assert m["refs"] == ["https://github.com/eugr/spark-vllm-docker/issues/266"]
    assert doc["summary"] == {"matched": 1, "exact": 1, "tolerant": 0, "ambiguous": 0, "evidence": {"reproduced": 0, "checked": 0, "reported": 1}}
    assert doc["ambiguous"] == []


def test_explain_nothing_known_exits_1():
    p = run(str(DATA / "vllm-clean-start.log"))
    assert p.returncode == 1 and b"No known symptom" in p.stdout


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.log", "missing.log: cannot read: No such file or directory"),
    (lambda d: (d / "bin.log").write_bytes(b"\x7fELF\x00\x00") and d / "bin.log", "bin.log: binary data, not log text"),
])
def test_explain_bad_input_is_one_line(tmp_path, make, message):
    p = run(str(make(tmp_path)))
    assert p.returncode == 2 and not p.stdout
    assert p.stderr.decode().count("\n") == 1 and message in p.stderr.decode()


@pytest.mark.parametrize("name, candidates", [
    ("gb10-no-kernel-image.txt", ["torch-cuda-below-128", "cutedsl-arch-unset"]),
    ("cutedsl-mma-ptxas.txt", ["cutedsl-450-libs-base-mma", "cutedsl-wheel-collision"]),
])
def test_shared_symptoms_are_ambiguous_never_one_exact_error(name, candidates):
    done = run(str(DATA / name), "-f", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    [amb] = doc["ambiguous"]
    assert sorted(c["id"] for c in amb["candidates"]) == sorted(candidates)
    assert amb["decide_with"] == "sparkdoctor check" and all(c["tells_apart"] for c in amb["candidates"])
    assert doc["summary"]["exact"] == 0 and doc["summary"]["ambiguous"] == 1
    assert all(m["ambiguous"] and sorted(m["candidates"]) == sorted(candidates) for m in doc["matches"])
    console = run(str(DATA / name)).stdout.decode()
    assert "AMBIGUOUS" in console and "sparkdoctor check" in console and "exact match" not in console


@pytest.mark.parametrize("name", ["deepgemm-unsupported-arch.txt", "deepgemm-unknown-recipe.txt"])
def test_a_symptom_only_one_entry_has_stays_a_single_match(name):
    doc = json.loads(run(str(DATA / name), "-f", "json").stdout)
    assert doc["ambiguous"] == [] and doc["summary"]["exact"] == 1
    assert [m["id"] for m in doc["matches"]] == ["vllm-deep-gemm-gb10"] and "ambiguous" not in doc["matches"][0]


def test_a_generic_triton_illegal_memory_access_explains_nothing():
    assert run(str(DATA / "triton-illegal-memory-access.txt")).returncode == 1


def test_multi_node_candidates_are_decided_by_fleet_check():
    """The NCCL watchdog line has multi-node causes whose conditions only `fleet check` evaluates (when.fleet is never
    true on one box): explain points there, not at `check`."""
    p = run(str(DATA / "nccl-watchdog-two-sparks.log"), "--format", "json")
    doc = json.loads(p.stdout)
    [amb] = doc["ambiguous"]
    assert amb["decide_with"] == "sparkdoctor fleet check"
    assert "`sparkdoctor fleet check`" in run(str(DATA / "nccl-watchdog-two-sparks.log")).stdout.decode()


def test_a_huge_matched_line_is_cut_in_json_and_its_length_said():
    """A 5 MB line holding a symptom came back whole in `--format json` (the console cut it to 300 characters)."""
    from sparkdoctor.matrix import load
    from sparkdoctor.matrix.symptoms import LINE_CHARS, match_text

    entries = load(None).entries
    symptom = next(s for e in entries for s in e.symptoms if len(s) > 20)
    (found, *_rest) = [m for m in match_text("x" * 5_000_000 + " " + symptom + "\n", entries) if m.symptom == symptom]
    doc = found.to_dict()
    assert len(doc["line"]) == LINE_CHARS and doc["line_chars"] == 5_000_001 + len(symptom)
