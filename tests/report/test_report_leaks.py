"""No redacted class leaks out of a bug report, in either format.

A realistic GB10 Facts (tests/gb10.py) gets a secret planted in every field that can carry one: the
target interpreter and prefix, package locations and modified files, ptxas paths, env values
(secret-named and address-named), the host name, collector errors, kernel probe output, cutlass-dsl
and capability evidence, constraints files, and a target key a newer collector might add. The
planted facts also fire matrix entries whose evidence quotes paths, so findings carry them too.
Both formats are rendered and no planted string may survive; hypothesis varies the user and host
names, IPv4/IPv6/MAC addresses and tokens. With --no-redact they must all be there (the test can fail).
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

from sparkdoctor.anonymize import Redactor, redactor_for
from sparkdoctor.facts import Facts
from sparkdoctor.findings import build_report
from sparkdoctor.matrix import load
from tests.gb10 import gb10_facts, ptxas
from tests.report.bug_report import REPORT_FORMATS, whole_report

MATRIX = load(None)
WORD = "A-Za-z0-9"  # a name between other characters is the name (alice_run.log names alice)
# Fixed examples; no shrinking (a failing example is printed as found: shrinking one took minutes).
CASES = settings(derandomize=True, database=None, deadline=None, max_examples=60, phases=[Phase.explicit, Phase.generate],
                 suppress_health_check=list(HealthCheck), print_blob=False)


def planted_facts(user: str, host: str, ip4: str, ip6: str, mac: str, tokens: dict[str, str]) -> Facts:
    home = f"/home/{user}"
    site = f"{home}/vllm/.venv/lib/python3.12/site-packages"
    facts = gb10_facts(packages={"triton": "3.5.1"}, modified={"vllm": [f"vllm/{user}_patch.py"]},
                       env={"HF_TOKEN": tokens["hf"], "OPENAI_API_KEY": tokens["sk"], "MY_SERVICE_SECRET": tokens["secret"],
                            "VLLM_HOST_IP": ip4, "MASTER_ADDR": f"{host}.cluster.lan", "HF_HOME": f"{home}/.cache/hf",
                            "VLLM_LOGGING_CONFIG_PATH": f"/Users/{user}/log.json", "CUTE_DSL_ARCH": None},
                       errors=[{"collector": "gpu", "error": f"nvidia-smi on {host} as {user}: cannot reach {ip6} "
                                f"(mac {mac}); Authorization: Bearer {tokens['bearer']}"},
                               {"collector": "serve-log", "error": f"GET https://{user}:{tokens['secret']}@hub.example/x failed: "
                                f"token {tokens['gh']} rejected from {ip4}."}])
    facts.target = {**facts.target, "python": f"{site}/../../../bin/python", "prefix": f"{home}/vllm/.venv",
                    "executable": f"{home}/vllm/.venv/bin/python3", "container_host": f"{host}.cluster.lan"}
    facts.host = {**facts.host, "hostname": f"{host}.cluster.lan"}
    facts.toolkits = [ptxas("13.0.88", "system", path=f"{home}/cuda-13/bin/ptxas"),
                      ptxas("12.8.93", "triton", path=f"{site}/triton/backends/nvidia/bin/ptxas", used_by=["triton"])]
    for pkg in facts.packages.values():
        pkg["location"] = site
    facts.packages["vllm"]["files_shared"] = {f"{site}/vllm/x.py": ["other"]}
    facts.cutedsl = {**facts.cutedsl, "evidence": f"{site}/nvidia_cutlass_dsl/lib/_cutlass_ir.so on {host} matches"}
    facts.kernels["e2m1-cvt"] = {"kind": "ptx", "status": "fail", "arch": "sm_121a",
                                 "detail": f"ptxas {home}/cuda-13/bin/ptxas on {host} ({ip4}) crashed; HF_TOKEN={tokens['hf']}",
                                 "runs": [{"ptxas": f"{home}/cuda-13/bin/ptxas", "ptxas_version": "13.0.88", "compiled": False,
                                           "error": f"{home}/tmp/x.ptx: {ip6} {mac}"}]}
    facts.capabilities["vllm.cmake_keeps_arch_suffix"] = {"value": True, "evidence": f"{site}/vllm/CMakeLists.txt:12"}
    facts.constraints = [{"name": "vllm", "requirement": "vllm==0.22.0", "file": f"{home}/constraints.txt", "line": 1}]
    return facts


def leaked(text: str, user: str, host: str, ip4: str, ip6: str, mac: str, tokens: dict[str, str]) -> list[str]:
    text = re.sub(r"\\(.)", r"\1", text)  # as GitHub shows the markdown: `\_` is `_`
    found = []
    for name in (user, host, f"{host}.cluster.lan"):
        if re.search(rf"(?<![{WORD}]){re.escape(name)}(?![{WORD}])", text):
            found.append(name)
    if re.search(rf"(?<![\d.]){re.escape(ip4)}(?!\d|\.\d)", text):
        found.append(ip4)
    for literal in (ip6, mac, *tokens.values()):
        if literal in text:
            found.append(literal)
    return found


def render(facts: Facts, fmt: str, redact: bool = True) -> str:
    return whole_report(build_report(facts, MATRIX), fmt, redact=redact)


# Words the report prints for reasons of its own: a planted name equal to one cannot be told apart.
BASELINE_WORDS = set(re.findall(rf"[{WORD}]+", "".join(render(gb10_facts(packages={"triton": "3.5.1"}), fmt, redact=False)
                                                        for fmt in REPORT_FORMATS)))

names = st.from_regex(r"[a-z][a-z0-9]{2,10}", fullmatch=True)
hosts = st.from_regex(r"[a-z][a-z0-9]{1,8}-[a-z0-9]{1,6}", fullmatch=True)
ip4s = st.ip_addresses(v=4).filter(lambda a: not (a.is_loopback or a.is_unspecified)).map(str)
ip6s = st.ip_addresses(v=6).filter(lambda a: not (a.is_loopback or a.is_unspecified)).map(str)
macs = st.tuples(st.lists(st.integers(0, 255), min_size=6, max_size=6), st.sampled_from([":", "-"]), st.booleans()).map(
    lambda t: t[1].join(f"{b:02X}" if t[2] else f"{b:02x}" for b in t[0]))
alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
tokens = st.fixed_dictionaries({
    "hf": st.text(alnum, min_size=30, max_size=40).map(lambda s: "hf_" + s),
    "sk": st.text(alnum + "-_", min_size=30, max_size=50).map(lambda s: "sk-proj-" + s),
    "gh": st.text(alnum, min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    "bearer": st.text(alnum + "._-", min_size=24, max_size=40),
    "secret": st.text(alnum + "!#$%*+=?^~", min_size=12, max_size=30),
})


@CASES
@given(user=names, host=hosts, ip4=ip4s, ip6=ip6s, mac=macs, tokens=tokens)
def test_no_redacted_class_leaks_from_either_format(user, host, ip4, ip6, mac, tokens):
    assume(user not in BASELINE_WORDS and host.split("-")[0] not in BASELINE_WORDS and user != host)
    facts = planted_facts(user, host, ip4, ip6, mac, tokens)
    for fmt in REPORT_FORMATS:
        text = render(facts, fmt)
        assert leaked(text, user, host, ip4, ip6, mac, tokens) == [], fmt
        assert "<user>" in text and "<host>" in text and "<ip>" in text and "<mac>" in text and "<redacted>" in text


def test_no_redact_keeps_everything_so_the_leak_check_can_fail():
    secrets = {"hf": "hf_" + "a1" * 16, "sk": "sk-proj-" + "b2" * 16, "gh": "ghp_" + "c3" * 18, "bearer": "d4" * 10,
               "secret": "e5!" * 5}
    facts = planted_facts("zorblat", "spark-07", "10.20.30.40", "fe80::1234:5678", "aa:bb:cc:dd:ee:0f", secrets)
    for fmt in REPORT_FORMATS:
        text = render(facts, fmt, redact=False)
        assert set(leaked(text, "zorblat", "spark-07", "10.20.30.40", "fe80::1234:5678", "aa:bb:cc:dd:ee:0f", secrets)) >= {
            "zorblat", "spark-07", "10.20.30.40", "fe80::1234:5678", "aa:bb:cc:dd:ee:0f", *secrets.values()}, fmt
        assert "NOT anonymized" in text


def test_findings_quoting_planted_paths_are_redacted_too():
    """The triton ptxas entry quotes the ptxas path and the modified-files entry the file: both fire."""
    facts = planted_facts("zorblat", "spark-07", "10.20.30.40", "fe80::1", "aa:bb:cc:dd:ee:0f",
                          {"hf": "hf_" + "x" * 30, "sk": "sk-" + "y" * 30, "gh": "ghp_" + "z" * 36, "bearer": "q" * 20,
                           "secret": "s3cr3t-value"})
    report = build_report(facts, MATRIX)
    ids = {f.id for f in report.findings}
    assert {"triton-ptxas-no-sm121a", "vllm-hand-modified"} <= ids
    evidence = " ".join(e for f in report.findings for e in f.evidence)
    assert "zorblat" in evidence  # the real evidence quotes it ...
    text = whole_report(report, "github")
    assert "zorblat" not in text and "/home/<user>/vllm/.venv/lib/python3.12/site-packages/triton" in text  # ... the report does not


# Eight more kinds a report carried out (each planted where a report shows it: a collector's error), and what of
# each must not survive. Found by attacking `report` with hostile facts; each case failed before its fix.
MORE_KINDS = {
    "gitlab-token": ("git clone failed: token glpat-Xy7aB3cD9eF1gH5iJ2kL rejected", ["glpat-Xy7aB3cD9eF1gH5iJ2kL"]),
    "stripe-live-keys": ("billing hook: sk_live_51HxYz0AbCdEfGhIjKlMn and rk_live_51HxYz0QrStUvWxYzAb refused",
                         ["sk_live_51HxYz0AbCdEfGhIjKlMn", "rk_live_51HxYz0QrStUvWxYzAb"]),
    "azure-sas-sig": ("GET https://acct.blob.core.windows.net/m/x.safetensors?sv=2022-11-02&sp=r&sig=AbC%2BdEf%2FgHi%3D "
                      "failed", ["AbC%2BdEf%2FgHi%3D", "%2BdEf"]),
    "openssh-key-last-line": ("ssh: load key: invalid format: AAAECWJvYkBzcGFyay0wMQECAwQF\n"
                              "-----END OPENSSH PRIVATE KEY-----", ["AAAECWJvYkBzcGFyay0wMQECAwQF"]),
    "mysql-password": ("backup: mysqldump -uroot -pS3cretPw0rd vllm_db exited 2", ["S3cretPw0rd"]),
    "curl-user-password": ("fetch: curl -u plantuser:plantpass123 https://hub.example/x exited 22; "
                           "wget --user=bob:Wg3tPass9 failed", ["plantpass123", "Wg3tPass9"]),
    "pw-named-value": ("serve: VLLM_PW=plantedpw999 rejected (user=plantu4 pw=plantpw4)", ["plantedpw999", "plantpw4"]),
    "corporate-host-in-text": ("pip: cannot reach artifactory.acme-corp.com through the proxy",
                               ["artifactory.acme-corp.com", "acme-corp"]),
    "corporate-host-in-url": ("GET https://gitlab.acme-corp.com/ml/vllm/-/raw/main/x.patch: 403", ["acme-corp"]),
    "user-in-non-home-path": ("cannot open /data/users/jdoe42/models/x: permission denied for jdoe42", ["jdoe42"]),
    # single quotes: vLLM logs its arguments as a Python dict (`non-default args: {...}`), argparse as a Namespace
    "python-dict-repr": ("non-default args: {'model': 'm', 'api_key': ['PyDictKey77'], 'hf_token': 'PyDictTok88'}",
                         ["PyDictKey77", "PyDictTok88"]),
    "namespace-repr": ("args: Namespace(host=None, api_key='NsApiKey66', port=8000)", ["NsApiKey66"]),
    "shell-single-quotes": ("launch: HF_TOKEN='ShTok55x' MY_PASSWORD='two words pw' vllm serve m", ["ShTok55x", "two words pw",
                                                                                                    "words pw"]),
    "quoted-flag-value": ("serve: vllm serve m --api-key 'quoted key 44' --port 8000", ["quoted key 44", "key 44"]),
    "authorization-token-scheme": ("GET /repos/x/y: 401 with Authorization: token 0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b",
                                   ["0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b"]),  # GitHub's API scheme; hex, as its old tokens
    # DNS names ignore case: a host learned as Alice-Spark is the same machine written ALICE-SPARK or alice-spark
    "host-in-another-case": ("ssh Alice-Spark failed; ALICE-SPARK: no route, ping alice-spark timed out",
                             ["Alice-Spark", "ALICE-SPARK", "alice-spark"]),
    # Python's ipaddress rejects leading zeros; ping and inet_aton read 010.001.002.003 as an address all the same
    "zero-padded-ipv4": ("bind 010.001.002.003:8000 failed; ssh opsbob@192.168.001.10 refused",
                         ["010.001.002.003", "192.168.001.10", "opsbob"]),
    # a URL inside a URL's parameter (an OAuth redirect) is percent-encoded: its `=` is %3D, its `&` %26
    "percent-encoded-pair": ("GET /login?next=%2Fcb%3Faccess_token%3Dsecret123%26page%3D2 and state=x%26api_key%3dPctKey456 "
                             "and u=%3Fsig%3DPctSig789", ["secret123", "PctKey456", "PctSig789"]),
    # a header written with a space for its colon (a proxy's dump, a header table pasted as text)
    "header-without-colon": ("upstream sent X-Auth-Token abcdefghijk; retried with X-Api-Key Hk7pQ2vX9m and "
                             "Proxy-Authorization dXNlcjpwYXNz", ["abcdefghijk", "Hk7pQ2vX9m", "dXNlcjpwYXNz"]),
}


@pytest.mark.parametrize("kind", list(MORE_KINDS))
@pytest.mark.parametrize("fmt", REPORT_FORMATS)
def test_more_kinds_do_not_leak(kind, fmt):
    planted, secrets = MORE_KINDS[kind]
    facts = gb10_facts(packages={"triton": "3.5.1"}, errors=[{"collector": "serve-log", "error": planted}])
    text = re.sub(r"\\(.)", r"\1", render(facts, fmt))
    assert [s for s in secrets if s in text] == []
    assert "<redacted>" in text or "<host>" in text or "<user>" in text
    assert all(s in render(facts, fmt, redact=False) for s in secrets)  # planted where the report shows it


def test_a_whole_pem_block_goes_even_when_cut():
    key = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
           "AAAECWJvYkBzcGFyay0wMQECAwQF\n-----END OPENSSH PRIVATE KEY-----")
    r = Redactor()
    assert r.text(f"key:\n{key}\nend") == "key:\n<redacted>\nend"
    assert r.text(f"cut: {key[:60]}") == "cut: <redacted>"
    assert r.text(key[40:]) == "<redacted>"  # the BEGIN line cut off: the base64 before END goes with it


def test_public_hosts_survive():
    kept = ("fetched https://pypi.org/simple/vllm/ and https://github.com/vllm-project/vllm/issues/1, "
            "huggingface.co/org/m, https://docs.nvidia.com/cuda/ and https://forums.developer.nvidia.com/t/1, "
            "nvcr.io/nvidia/vllm:25.09-py3, https://download.pytorch.org/whl/cu130, www.nvidia.com")
    assert Redactor().text(kept) == kept
    for near_miss in ("vllm/v1/attention/backends/mla/triton_mla.py", "run.sh", "README.md", "libcuda.so.1", "kernel.cu",
                      "requirements.in", "vllm 0.11.1.dev23+gabc", "torch.cuda.is_available", "vm.max_map_count",
                      "patch -p1 -d /", "/usr/local/lib/python3.12"):
        assert Redactor().text(near_miss) == near_miss
    facts = gb10_facts(packages={"triton": "3.5.1"}, errors=[{"collector": "serve-log", "error": kept}])
    for fmt in REPORT_FORMATS:
        text = re.sub(r"\\(.)", r"\1", render(facts, fmt))
        for host in ("pypi.org", "github.com", "huggingface.co", "docs.nvidia.com", "forums.developer.nvidia.com", "nvcr.io"):
            assert host in text, (fmt, host)


@pytest.mark.parametrize("chunk", ["a.com ", "a-a.", "x.y.z.com.", "-----END X-----", "a=-----END K-----", "-----BEGIN X-----",
                                   "mysql ", "mysql -p", "/scratch/", "/u/a", "sig=", "glpat-", "sk_live_", "AAAAAAAA\n",
                                   "key='", "key: '", "--key '", "key=['", "key=\"aaaaaa", "Authorization: token ",
                                   "010.001.002.003 ", "001.", "a%3D", "%26a", "a%41", "token%3Da%", "%3Dkey%3D%2",
                                   "X-Key ", "X-A-", "X-Key abcdefgh:", "X-Key a.B-C", "A-Token abcdefgh ",
                                   # an address after `name:`, scp's HOST:/path, login passwords (2,000 `a:` took 85 s)
                                   "a:", "a1", "a-", "wandb login --a", " --a", " -", "docker login -x ", "<redacted>.a",
                                   "ip-1-2-3-", "~a", "a://a:", "%2Fhome%2Fa"])
def test_the_new_scans_stay_linear(chunk):
    """A hostile 1 MB string of each new shape's pieces is learned from and redacted in bounded CPU time (each scan
    reads a run once)."""
    started = time.process_time()
    redactor_for({"errors": [{"collector": "x", "error": chunk * 100_000}]}).text(chunk * 100_000)
    # linear is 1-6 CPU s here (4x the CPU of a quarter of the input), more on a loaded box's shared cores; a quadratic
    # scan of 1 MB takes hours (2,000 `a:` took 85 s)
    assert time.process_time() - started < 20, chunk


def test_a_host_name_is_matched_in_any_case_a_user_name_as_learned():
    """Host names are case-insensitive (DNS); a user name is not (`Bob` the user, `bob` a word). A weak host name
    (a common word: `spark`) keeps its case too, or `DGX Spark` would lose its product name on a host called spark."""
    r = redactor_for({"host": {"hostname": "Alice-Spark"}, "env": {"USER": "Bob"}})
    assert r.text("Alice-Spark, ALICE-SPARK and alice-spark.lab") == "<host>, <host> and <host>.lab"
    assert r.text("Bob and bob") == "<user> and bob"
    weak = redactor_for({"host": {"hostname": "spark"}})
    assert weak.text("on spark, a DGX Spark") == "on <host>, a DGX Spark"
    # a host named as a plain word keeps that word's other cases: Ubuntu's default host name, a box named after its GPU
    for host, kept in (("ubuntu", "Ubuntu 24.04.3 LTS"), ("nvidia", "NVIDIA GB10"), ("gx10", "ASUS GX10"),
                       ("workstation", "Workstation")):
        assert redactor_for({"host": {"hostname": host}}).text(f"{kept} on {host}") == f"{kept} on <host>", host


def test_an_llms_token_ids_are_numbers_not_secrets():
    """`*_token_id(s)` hold vocabulary numbers: hidden and learned as secrets, every 151645 in the report went."""
    log = "SamplingParams(n=1, stop_token_ids=[151645]), {'return_tokens_as_token_ids': True, 'eos_token_id': 2}"
    r = redactor_for({"errors": [{"collector": "serve-log", "error": log}]})
    assert r.text(log) == log
    assert r.text("vocab 151645 seed 1516450") == "vocab 151645 seed 1516450"
    assert r.text("{'hf_token': ['hf-secret-1'], 'api_key': 'k1234567'}") == "{'hf_token': ['<redacted>'], 'api_key': '<redacted>'}"


@pytest.mark.parametrize("before, after", [
    ("peer 010.001.002.003 down", "peer <ip> down"),
    ("MASTER_ADDR=192.168.001.10:29500", "MASTER_ADDR=<ip>:29500"),
    ("bob@010.0.0.5 refused", "<user>@<ip> refused"),
    ("bind 127.000.000.001 and 000.000.000.000", "bind 127.000.000.001 and 000.000.000.000"),  # loopback, unspecified
    ("999.001.1.1 and 1.2.3.0004", "999.001.1.1 and 1.2.3.0004"),  # no address: a part over 255, or 4 digits
    ("cuDNN 12.1.0.105", "cuDNN <ip>"),  # unpadded: as before (a version is kept where the Facts name it one)
])
def test_a_zero_padded_quad_is_read_as_the_address_it_denotes(before, after):
    assert Redactor().text(before) == after
    assert redactor_for({"packages": {"x": {"version": "010.001.002.003"}}}).text("x 010.001.002.003") == "x 010.001.002.003"


@pytest.mark.parametrize("before, after", [
    ("next=%2Fcb%3Faccess_token%3Dsecret123%26page%3D2", "next=%2Fcb%3Faccess_token%3D<redacted>%26page%3D2"),
    ("q=a%26password%3dp%40ss&b=1", "q=a%26password%3d<redacted>&b=1"),
    ("x=\"token%3Dabc123def\" ok", "x=\"token%3D<redacted>\" ok"),
    ("max_tokens%3D512%26tokenizer%3Dauto%26page%3D2", "max_tokens%3D512%26tokenizer%3Dauto%26page%3D2"),  # no secret names
])
def test_a_percent_encoded_secret_pair_is_redacted(before, after):
    assert Redactor().text(before) == after


@pytest.mark.parametrize("before, after", [
    ("X-Auth-Token abcdefghijk", "X-Auth-Token <redacted>"),
    ("sent X-API-KEY Hk7pQ2vX9m, then X-Goog-Api-Key AIzaSyA-b1c2d3", "sent X-API-KEY <redacted>, then X-Goog-Api-Key <redacted>"),
    ("GitLab Private-Token glpatxyz1234567890ab", "GitLab Private-Token <redacted>"),
    ("Using Per-Token fp8_e4m3 quantization", "Using Per-Token fp8_e4m3 quantization"),  # an identifier: no token
    # prose: no header shape (lower case, no hyphen), a name that is no secret, two spaces, a value under 8 characters
    ("the token is here", "the token is here"), ("401 Authorization Required", "401 Authorization Required"),
    ("pass the api-key argument", "pass the api-key argument"), ("X-Token-Count 12345678", "X-Token-Count 12345678"),
    ("X-Auth-Token missing", "X-Auth-Token missing"), ("X-Api-Key  abcdefghijk", "X-Api-Key  abcdefghijk"),
    # a plain word after a hyphenated name that is no X- header: vLLM's and papers' compound adjectives
    ("Multi-Token Prediction enabled", "Multi-Token Prediction enabled"), ("Per-Token quantization", "Per-Token quantization"),
    ("Api-Key required", "Api-Key required"), ("Next-Token Prediction with Per-Token FP8", "Next-Token Prediction with Per-Token FP8"),
])
def test_a_secret_header_with_a_space_for_its_colon_is_redacted(before, after):
    assert Redactor().text(before) == after


def test_the_fingerprint_gives_back_nothing_a_report_replaced():
    """The report printed the real fingerprint, a hash of values it had replaced (VLLM_* values, CUDA_HOME): hashing
    candidate users and addresses into it gave them back (5 names x 256 addresses recovered `zoe` and `.77`). It is
    shown only when no value it covers was replaced, and the attachment is named by when the snapshot was taken."""
    from sparkdoctor.fit import attachment_name

    args = ("zoe", "spark-b7e2", "192.168.1.77", "fe80::1:2", "58:1b:2c:3d:4e:5f",
            {"hf": "hf_" + "a" * 34, "sk": "sk-proj-" + "b" * 40, "gh": "ghp_" + "c" * 36, "bearer": "d" * 30, "secret": "e" * 20})
    planted = planted_facts(*args)
    for fmt in REPORT_FORMATS:
        text = render(planted, fmt)
        assert planted.fingerprint() not in text and "withheld (it is a hash of values this report replaced)" in text, fmt
    clean = gb10_facts(packages={"triton": "3.5.1"})
    for fmt in REPORT_FORMATS:
        assert clean.fingerprint() in render(clean, fmt), fmt  # nothing it covers was replaced: the one `check` prints
    name = attachment_name(None, "github", planted.taken_at)
    assert planted.fingerprint()[:12] not in name and name.startswith("sparkdoctor-report-2") and name.endswith(".full.md")


def test_a_nodes_own_address_is_not_part_of_the_toolchains_fingerprint():
    """VLLM_HOST_IP (and the other per-node addresses and ports) decide nothing about the toolchain: two nodes of one
    stack had two fingerprints, and `history --html` listed an address change as a toolchain change."""
    a = gb10_facts(packages={"triton": "3.5.1"}, env={"VLLM_HOST_IP": "10.0.0.1", "VLLM_PORT": "8000", "VLLM_DP_MASTER_IP": "10.0.0.1"})
    b = gb10_facts(packages={"triton": "3.5.1"}, env={"VLLM_HOST_IP": "10.0.0.2", "VLLM_PORT": "8001", "VLLM_DP_MASTER_IP": "10.0.0.9"})
    assert a.fingerprint() == b.fingerprint()
    c = gb10_facts(packages={"triton": "3.5.1"}, env={"VLLM_HOST_IP": "10.0.0.1", "VLLM_USE_V1": "0"})
    assert c.fingerprint() != a.fingerprint()  # a VLLM_ setting still is


def test_check_markdown_is_anonymized_as_the_report_is():
    """`check --format markdown` is offered to paste into an issue, and printed every value as found."""
    from sparkdoctor.views.markdown import render_markdown

    args = ("zoe", "spark-b7e2", "192.168.1.77", "fe80::1:2", "58:1b:2c:3d:4e:5f",
            {"hf": "hf_" + "a" * 34, "sk": "sk-proj-" + "b" * 40, "gh": "ghp_" + "c" * 36, "bearer": "d" * 30, "secret": "e" * 20})
    text = render_markdown(build_report(planted_facts(*args), MATRIX))
    assert leaked(text, *args) == []
    assert "<user>" in text and "Anonymized by sparkdoctor" in text


@pytest.mark.parametrize("text, gone, kept", [
    # a JWT whose first and last parts were learned as keys kept its claims between them ({"sub":"alice@acme.io"})
    ('curl -H "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJhbGljZUBhY21lLmlvIn0.'
     'SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"', "eyJzdWIiOiJhbGljZUBhY21lLmlvIn0", "Bearer <redacted>"),
    # NCCL's IPv6 line: the EUI-64 address gives the NIC's MAC away
    ("NCCL INFO NET/Socket : Using [0]enp1s0f0np0:fe80::5a1b:2cff:fe3d:4e5f%enp1s0f0np0<0>", "5a1b:2cff", "enp1s0f0np0:<ip>"),
    ("addr:2001:db8:85a3::8a2e:370:7334", "8a2e", "addr:<ip>"),
    ("nccl_debug_10.0.0.7.log ib_192.168.100.12 libcudnn_9.1.0.70", "192.168.100", "libcudnn_9.1.0.70"),
    ("resolved ip-192-168-100-13 first", "192-168-100-13", "resolved <host> first"),
    # a peer's name after vLLM/Ray's prefix, and scp/rsync's HOST:/path
    ("(RayWorkerWrapper pid=4242, ip=10.0.0.2) spark-b7e2:4242:4242 [0] NCCL INFO x", "spark-b7e2", "<host>:4242:4242"),
    ("scp -r /opt/models/qwen spark-c9:/opt/models/ and rsync -av ./ckpt gx10-peer2:/data/ckpt", "gx10-peer2", "<host>:/opt/models/"),
    ("judy@localhost", "judy", "<user>@localhost"),
])
def test_more_forms_of_names_and_addresses_are_redacted(text, gone, kept):
    r = redactor_for({"errors": [{"collector": "x", "error": text}]})
    out = r.text(text)
    assert gone not in out and kept in out, out


def test_words_with_colons_and_versions_after_an_underscore_are_not_addresses():
    r = redactor_for({"errors": [{"collector": "x", "error": "utf-8:/x"}]})
    for text in ("time 12:30:45 ok", "std::vector<int> a::b::c", "utf-8:/x and sm_121a:/x", "libcudnn_9.1.0.70", "C:/Users"):
        assert r.text(text) == text


@pytest.mark.parametrize("text, secret", [
    ("docker login nvcr.io -u '$oauthtoken' -p MyPlainPassw0rd", "MyPlainPassw0rd"),
    ("podman login -u bob --password 'two words' registry.local", "two words"),
    ("docker login --password=abc123 x", "abc123"),
    ("sshpass -p Hunter2Pass ssh peer", "Hunter2Pass"),
    ("wandb login --relogin 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
])
def test_a_password_given_to_a_login_command_is_redacted(text, secret):
    out = Redactor().text(text)
    assert secret not in out and "<redacted>" in out, out


def test_other_programs_dash_p_is_left_alone():
    for text in ("docker run -p 8000:8000 img", "patch -p1 < x", "wandb login", "ssh -p 2222 host"):
        assert "<redacted>" not in Redactor().text(text), text


def test_a_user_named_by_tilde_or_by_a_mounted_drive_is_learned_and_replaced():
    """`~oscar/.cache` and the folders Ubuntu mounts drives under (/media/NAME, /run/media/NAME) kept the name in a
    report made from a snapshot (a live report learns the local user)."""
    texts = ["cache in ~oscar/.cache/hf", "model on /media/carol/disk/m", "/run/media/dave/usb/x"]
    r = redactor_for({"errors": [{"collector": "x", "error": t} for t in texts]})
    out = " ".join(r.text(t) for t in [*texts, "oscar carol dave"])
    assert not {"oscar", "carol", "dave"} & set(re.findall(r"\w+", out)), out
    assert r.text("cd ~/x, ~root/.bashrc") == "cd ~/x, ~root/.bashrc"


def test_a_percent_encoded_home_path_is_learned_and_replaced():
    """A file:// link or a query string carries the home path percent-encoded (`%2Fhome%2Fbobby`): the user
    name was kept, there and wherever else it stood."""
    texts = ["opened file%3A%2F%2F%2Fhome%2Fbobby%2Fmodels", "GET /load?path=%2fUsers%2ferin%2fx.gguf"]
    r = redactor_for({"errors": [{"collector": "x", "error": t} for t in texts]})
    out = " ".join(r.text(t) for t in [*texts, "bobby erin"])
    assert not {"bobby", "erin"} & set(re.findall(r"[a-z]+", out)), out


def test_the_user_in_a_urls_user_info_is_not_learned_as_a_host():
    """`http://admin:pw@10.0.0.9/` taught `admin` as a host name, so every later "admin" became <host>; the
    password still goes and the address too."""
    r = redactor_for({"errors": [{"collector": "x", "error": "GET http://admin:pw@10.0.0.9/v1 failed"}]})
    assert "admin" not in r.hosts
    assert r.text("the admin page at http://admin:pw@10.0.0.9/v1") == "the admin page at http://<redacted>@<ip>/v1"
    assert "spark-7" in redactor_for({"errors": [{"collector": "x", "error": "http://bob@spark-7:8000/"}]}).hosts
