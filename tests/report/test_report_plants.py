"""Issue 20, item 14: every class the report leaked is planted in env, paths, recipe argv, errors and a snapshot
file; nothing planted may appear in either format (nor in the attachment), and nothing that names no one may
be damaged (a host named `vm` must not turn /proc/sys/vm into /proc/sys/<host>)."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sparkdoctor.anonymize import redactor_for
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests.gb10 import gb10_facts
from tests.report.bug_report import REPORT_FORMATS, whole_report
from tests.report.report_cli import run_report

MATRIX = load(None)
RANDOM40 = "Zq8vN3pL0xR7tW2yK5mB9cD4fG6hJ1sA0eU3iO7r"  # a generated secret in a variable not named *KEY*

# class -> the planted strings that must not appear
PLANTED = {
    "pair in a pair": ["hunter2"],
    "token in a URL query": ["Tq9plantURLtok"],
    "value after --api-key": ["apikeyPLANT1", "apikeyPLANT2"],
    "secret-named flag or variable": ["tokPLANT3", "pwPLANT4", "pwPLANT5", "pwPLANT6"],
    "e-mail address": ["jane.doe@example.org", "jane.doe"],
    "other machines' host names": ["spark-peer7", "gpu-node-12", "dgx-b2", "infer-03"],
    "user@ip": ["opsbob"],
    "random secret in a variable not named KEY": [RANDOM40],
}
# text that names no one: must come out as it went in
KEPT = ["/proc/sys/vm/drop_caches", "vm.max_map_count", "https://github.com/vllm-project/vllm/issues/1",
        "--tokenizer", "max_tokens=128", "TOKENIZERS_PARALLELISM", "3e4d1d2a9f8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d",
        "127.0.0.1:8000", "--served-model-name", "author: someone", "Sm121aKernelDispatchForNvfp4GemmTiles",
        "sha256:9c0a4e1b2d3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"]


def planted_facts():
    facts = gb10_facts(packages={"triton": "3.5.1"},
                       env={"VLLM_API_KEY": "apikeyPLANT2", "DEPLOY_BLOB": RANDOM40, "GIT_AUTHOR_EMAIL": "jane.doe@example.org",
                            "TOKENIZERS_PARALLELISM": "false", "MASTER_ADDR": "gpu-node-12", "CUTE_DSL_ARCH": None})
    facts.host = {**facts.host, "hostname": "vm"}  # this box is called vm
    facts.errors = [
        {"collector": "gpu", "error": "error: password=hunter2 while reading /proc/sys/vm/drop_caches on vm "
                                      "(vm.max_map_count too low); author: someone"},
        {"collector": "serve-log", "error": "GET https://hub.example/api?token=Tq9plantURLtok&page=1 failed; see "
                                            "https://github.com/vllm-project/vllm/issues/1 and commit "
                                            "3e4d1d2a9f8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"},
        {"collector": "recipe", "error": "ran: vllm serve m --api-key apikeyPLANT2 --hf-token tokPLANT3 --db-password=pwPLANT4 "
                                         "--tokenizer /models/tok --served-model-name tiny max_tokens=128"},
        {"collector": "shell", "error": "export MY_PASSWORD=pwPLANT5; ssh opsbob@10.20.30.40 and ssh spark-peer7; "
                                        "mail jane.doe@example.org; curl http://infer-03:8000/v1/models; bind 127.0.0.1:8000"},
        {"collector": "nccl", "error": "dgx-b2:4242:4242 [0] NCCL INFO Bootstrap : Using enp1s0f1np1"},
        {"collector": "image", "error": "layer sha256:9c0a4e1b2d3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b; "
                                        "symbol Sm121aKernelDispatchForNvfp4GemmTiles"},
    ]
    facts.recipe = {"name": "planted", "argv": ["vllm", "serve", "/data/spark-peer7/models/m", "--api-key", "apikeyPLANT1",
                                                "--master-addr", "gpu-node-12", "--extra-secret-arg", RANDOM40,
                                                "--db-pass", "pwPLANT6"],
                    "env": {"HF_TOKEN": "tokPLANT3", "SOME_BLOB": RANDOM40}, "model": {"ref": "m"}}
    facts.target = {**facts.target, "prefix": "/data/spark-peer7/venv"}
    return facts


def leaks(text: str) -> dict[str, list[str]]:
    text = re.sub(r"\\(.)", r"\1", text)  # as GitHub shows the markdown
    return {cls: [p for p in plants if p in text] for cls, plants in PLANTED.items() if any(p in text for p in plants)}


def damaged(text: str) -> list[str]:
    text = re.sub(r"\\(.)", r"\1", text)
    return [k for k in KEPT if k not in text]


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_nothing_planted_appears_and_nothing_else_is_damaged(fmt):
    text = whole_report(build_report(planted_facts(), MATRIX), fmt)
    assert leaks(text) == {}
    assert damaged(text) == []
    assert "<email>" in text and "<user>@<ip>" in text and "password=<redacted>" in text


@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_the_leak_check_can_fail(fmt):
    text = whole_report(build_report(planted_facts(), MATRIX), fmt, redact=False)
    assert set(leaks(text)) == set(PLANTED)  # every class is really planted where the report shows it


@pytest.mark.parametrize("before, after", [
    ("error: password=hunter2", "error: password=<redacted>"),
    ("GET https://h.example/x?token=abc123&page=2", "GET https://<host>/x?token=<redacted>&page=2"),
    ("vllm serve m --api-key abc123 --port 1", "vllm serve m --api-key <redacted> --port 1"),
    ("--api-key=abc123", "--api-key=<redacted>"),
    ("PGPASSWORD=xyz987 psql", "PGPASSWORD=<redacted> psql"),
    ("mail jane.doe@example.org now", "mail <email> now"),
    ("ssh opsbob@10.20.30.40", "ssh <user>@<ip>"),
    ("ssh opsbob@spark-9", "ssh <user>@<host>"),
    ("curl http://infer-03:8000/v1", "curl http://<host>:8000/v1"),
    (f"X={RANDOM40}", "X=<redacted>"),
    ("--tokenizer /m/tok --max-tokens 9", "--tokenizer /m/tok --max-tokens 9"),
    ("cat /proc/sys/vm/drop_caches on vm", "cat /proc/sys/vm/drop_caches on <host>"),
    ("see https://github.com/a/b and pkg@v0.1.2", "see https://github.com/a/b and pkg@v0.1.2"),
    ("pip install vllm@0.11.0 and torch@2.10", "pip install vllm@0.11.0 and torch@2.10"),
    ("ssh root@[fe80::1] then bob@10.0.0.5:22", "ssh <user>@[<ip>] then <user>@<ip>:22"),
])
def test_each_class_in_one_line(before, after):
    r = redactor_for({"host": {"hostname": "vm"}})
    assert r.text(before) == after
    assert r.text(after) == after  # redacting twice changes nothing


def test_argv_values_after_secret_flags_go_in_any_list():
    r = redactor_for({})
    assert r.data({"argv": ["serve", "--api-key", "k", "--hf-token", "t", "--port", "1"]}) == {
        "argv": ["serve", "--api-key", "<redacted>", "--hf-token", "<redacted>", "--port", "1"]}


def test_a_planted_snapshot_through_the_real_cli(tmp_path):
    snap = tmp_path / "facts.json"
    planted_facts().save(snap)
    for fmt in REPORT_FORMATS:
        out = tmp_path / f"report-{fmt}.md"
        res = run_report(tmp_path, "--facts", snap, "--format", fmt, "-o", out)
        assert res.returncode == 0, res.stderr
        written = [p for p in tmp_path.iterdir() if p.name.startswith(f"report-{fmt}")]
        assert written, res.stderr
        for path in written:  # the report and any attachment beside it
            text = path.read_text()
            assert leaks(text) == {}, path.name
            assert damaged(text) == [], path.name


CASES = settings(derandomize=True, database=None, deadline=None, max_examples=40, phases=[Phase.explicit, Phase.generate],
                 suppress_health_check=list(HealthCheck), print_blob=False)
LOWER = "abcdefghijklmnopqrstuvwxyz"
ALNUM = LOWER + LOWER.upper() + "0123456789"


@CASES
@given(user=st.text(LOWER, min_size=4, max_size=10).map(lambda s: "u" + s), host=st.from_regex(r"[a-z]{3,8}-[0-9]{1,3}", fullmatch=True),
       secret=st.text(ALNUM + "!#%+", min_size=6, max_size=24).map(lambda s: "Sx9" + s), flag=st.sampled_from(["api-key", "hf-token", "db-password", "client-secret"]),
       var=st.sampled_from(["MY_PASSWORD", "SERVICE_TOKEN", "PGPASSWORD", "X_API_KEY"]))
def test_random_plants_of_the_new_classes_do_not_survive(user, host, secret, flag, var):
    facts = gb10_facts(env={"CUTE_DSL_ARCH": None})
    facts.errors = [{"collector": "x", "error": f"error: {var.lower()}={secret} from ssh {user}@10.9.8.7 and ssh {host}; "
                                                f"mail {user}.x@corp.example.com; GET http://{host}:80/?token={secret}z&a=1"}]
    facts.recipe = {"name": "r", "argv": ["vllm", "serve", "m", f"--{flag}", secret + "q"], "env": {var: secret + "v"}}
    for fmt in REPORT_FORMATS:
        text = re.sub(r"\\(.)", r"\1", whole_report(build_report(facts, MATRIX), fmt))
        assert secret not in text and f"{user}@" not in text and f"{user}.x@" not in text
        assert not re.search(rf"(?<![a-z0-9-]){re.escape(host)}(?![a-z0-9-])", text)
