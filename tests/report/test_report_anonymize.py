"""The anonymizer, class by class: what it must replace (trigger) and what it must keep (near miss),
so a report stays useful: versions, loopback binds, C++ scopes, timestamps and probe ids survive."""

from __future__ import annotations

import getpass
import socket

import pytest

from sparkdoctor.anonymize import Redactor, redactor_for, shapes


def learned() -> Redactor:
    return redactor_for({
        "host": {"os": "Ubuntu 24.04", "hostname": "spark-01.lab.example"},
        "target": {"python": "/home/alice/serve/.venv/bin/python"},
        "env": {"HF_TOKEN": "opaque-value-123", "MASTER_ADDR": "spark-02", "VLLM_HOST_IP": "10.1.2.3",
                "NCCL_SOCKET_IFNAME": "enp1s0f1np1"},
        "packages": {"nvidia-cublas-cu12": {"version": "12.4.5.8"}},
    })


@pytest.mark.parametrize("before, after", [
    ("/home/alice/serve/.venv/bin/python", "/home/<user>/serve/.venv/bin/python"),
    ("/Users/bob/x.json", "/Users/<user>/x.json"),  # a home path teaches nothing, yet is replaced
    ("permission denied for alice", "permission denied for <user>"),
    ("alice_run.log", "<user>_run.log"),
    ("ssh spark-01.lab.example failed", "ssh <host> failed"),
    ("spark-01: no route; spark-02: ok", "<host>: no route; <host>: ok"),
    ("bind 192.168.7.20:8000", "bind <ip>:8000"),
    ("from 10.1.2.3.", "from <ip>."),
    ("peer fe80::1c2d:3e4f%enp1s0 down", "peer <ip> down"),
    ("2001:db8::8a2e:370:7334.", "<ip>."),
    ("[::ffff:10.0.0.1]:80", "[<ip>]:80"),
    ("link aa:bb:cc:dd:ee:ff up", "link <mac> up"),
    ("AA-BB-CC-DD-EE-0F", "<mac>"),
    ("guid 00:00:10:87:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01", "guid <mac>"),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstu", "HF_TOKEN=<redacted>"),
    ("sk-proj-abcdefghijklmnop12 used", "<redacted> used"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "<redacted>"),
    ("github_pat_11AAAAAAA0abcdefghij", "<redacted>"),
    ("nvapi-abcdefghijklmnopqrstuv", "<redacted>"),
    ("AKIAABCDEFGHIJKLMNOP", "<redacted>"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer <redacted>"),
    ("bearer abc.def-ghi", "bearer <redacted>"),
    ("api_key=xyz password: hunter2", "api_key=<redacted> password: <redacted>"),
    ("https://bob:pw@hub.example/x", "https://<redacted>@<host>/x"),  # every URL host outside the public list
    ("value opaque-value-123 leaked", "value <redacted> leaked"),  # a secret env value, wherever it appears
])
def test_replaced(before, after):
    assert learned().text(before) == after


@pytest.mark.parametrize("kept", [
    "nvidia-cublas-cu12 12.4.5.8 installed",  # a known version is not an address
    "listening on 127.0.0.1 and 0.0.0.0 and ::1",  # loopback and unspecified name no machine
    "cute::gemm and std::vector", "22:35:18", "2026-11-22T22:35:18+00:00",
    "ptxas 13.0.88 · CUDA 13.0 · driver 580.95.05", "sm_121a", "cutedsl-nvfp4-mma", "999.1.1.1",
    "Ubuntu 24.04", "enp1s0f1np1", "the token was fine", "author: someone",
])
def test_kept(kept):
    r = learned()
    assert r.text(kept) == kept  # `author` is no secret name: a name is secret by its parts (auth, api_key), not its letters


def test_redacting_twice_changes_nothing():
    r = learned()
    once = r.text("alice@spark-01 10.0.0.9 aa:bb:cc:dd:ee:ff hf_abcdefghijklmnopqrstu Bearer x1y2z3")
    assert r.text(once) == once


def test_data_redacts_secret_named_env_values_whatever_they_hold_and_keeps_schema_keys():
    r = learned()
    out = r.data({"env": {"MY_API_KEY": "short", "CUDA_HOME": "/usr/local/cuda"},
                  "packages": {"x": {"version": "10.0.0.1", "location": "/home/alice/x",
                                     "files_shared": {"/home/alice/x/a.py": ["y"]}}}})
    assert out["env"] == {"MY_API_KEY": "<redacted>", "CUDA_HOME": "/usr/local/cuda"}
    assert out["packages"]["x"]["version"] == "10.0.0.1"  # a version field is never an address
    assert out["packages"]["x"]["location"] == "/home/<user>/x"
    assert out["packages"]["x"]["files_shared"] == {"/home/<user>/x/a.py": ["y"]}


def test_disabled_changes_nothing():
    r = redactor_for({"target": {"python": "/home/alice/x"}}, enabled=False)
    assert r.text("/home/alice/x 10.0.0.1") == "/home/alice/x 10.0.0.1"
    assert r.data({"env": {"HF_TOKEN": "v"}}) == {"env": {"HF_TOKEN": "v"}}


def test_local_learns_this_machines_user_and_host(monkeypatch):
    monkeypatch.setenv("USER", "zorblatuser")
    monkeypatch.setenv("LOGNAME", "zorblatuser")
    r = redactor_for({}, local=True)
    assert getpass.getuser() == "zorblatuser"
    assert r.text("zorblatuser ran it") == "<user> ran it"
    host = socket.gethostname()
    if host.split(".")[0].lower() not in ("localhost",) and len(host) >= 2:
        assert host not in r.text(f"on {host} today")


def test_local_learns_the_accounts_real_home_and_name_when_home_and_user_point_elsewhere(monkeypatch, tmp_path):
    """Under sudo, in CI or a container HOME and USER may name another place and name than the password database:
    the account's own home and login name (and SUDO_USER's) are this machine's identities too."""
    import pwd

    real = tmp_path / "srv" / "zorblathome"
    sudoer = tmp_path / "data" / "quuxhome"
    real.mkdir(parents=True)
    sudoer.mkdir(parents=True)
    account = pwd.struct_passwd(("zorblatacct", "x", 1000, 1000, "", str(real), "/bin/sh"))
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: account)
    monkeypatch.setattr(pwd, "getpwnam", lambda name: pwd.struct_passwd((name, "x", 1001, 1001, "", str(sudoer), "/bin/sh")))
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("USER", "ci")
    monkeypatch.setenv("LOGNAME", "ci")
    monkeypatch.setenv("SUDO_USER", "quuxsudo")
    r = redactor_for({}, local=True)
    text = f"{real}/venv/bin/python run by zorblatacct; {sudoer}/models for quuxsudo; /home/alice/x"
    assert r.text(text) == (f"{tmp_path}/srv/<user>/venv/bin/python run by <user>; {tmp_path}/data/<user>/models for <user>; "
                            "/home/<user>/x")
    assert r.text(f"{tmp_path}/elsewhere/.cache") == f"{tmp_path}/<user>/.cache"  # $HOME as before
    # an account whose home is not there (nobody's /nonexistent, which a program run with HOME=/nonexistent as root may
    # have made on this machine: a folder of tmp_path is surely not there) teaches no name
    missing = tmp_path / "nonexistent"
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: pwd.struct_passwd(("nobody", "x", 65534, 65534, "", str(missing), "/bin/sh")))
    monkeypatch.delenv("SUDO_USER")
    assert redactor_for({}, local=True).text(f"{missing} nobody") == f"{missing} nobody"


def test_a_long_hostile_string_is_redacted_in_linear_time():
    import time

    r = learned()
    # the pair scanner, e-mail, user@host, URL host and random-key shapes too (each anchored at a run's start)
    for chunk in ("a-", "ab:", "1.", "key=", "/home/", "host:", "--key ", "--host ", "a@b.", "http://a", "Ab1/", "a=b ",
                  "a://b:", "a://b:c/", "ssh -i ", "ssh -t"):
        started = time.process_time()  # CPU seconds: quadratic was minutes; a busy machine is not
        r.text(chunk * 100_000)
        assert time.process_time() - started < 5, chunk


def test_an_address_variable_holding_a_keyword_teaches_no_host_name():
    r = redactor_for({"env": {"RAY_ADDRESS": "auto", "MASTER_ADDR": "localhost"}})
    assert r.hosts == set()
    assert r.text("vllm.b12x_linear_auto on localhost") == "vllm.b12x_linear_auto on localhost"


@pytest.mark.parametrize("line, host", [
    ("ssh -i ~/.ssh/id_ed25519 spark-03 nvidia-smi", "spark-03"),
    ("ssh -p 2222 -o ServerAliveInterval=30 gx-node-7 true", "gx-node-7"),
    ("ssh -tt -A spark-04 top", "spark-04"),
    ("ssh -p2222 -l ubuntu spark-06 ls", "spark-06"),
])
def test_the_host_after_ssh_options_is_learned(line, host):
    r = learned()
    shapes.learn_from_text(line, r.learn_host, r.learn_secret)
    out = r.text(line)
    assert host not in out and "<host>" in out, out
    assert r.text(f"later: {host} went down") == "later: <host> went down"


@pytest.mark.parametrize("line, secrets, kept", [
    ("git clone https://bob:se/cr3t@git.example.org/x.git", ("bob", "se/", "cr3t"), "/x.git"),  # a raw / in it
    ("curl http://alice:p@ss/w0rd@10.0.0.5:8000/v1", ("alice", "p@ss", "w0rd"), ":8000/v1"),  # a raw @ and /
    ("pip install --index-url https://ci:tok3n@pypi.lab.example/simple vllm", ("ci:", "tok3n"), "/simple vllm"),
])
def test_a_url_password_goes_whole(line, secrets, kept):
    out = learned().text(line)
    assert not [s for s in secrets if s in out], out
    assert "<redacted>@" in out and out.endswith(kept), out


def test_a_registry_port_and_an_image_digest_are_not_a_password():
    line = "docker pull registry.example.org:5000/team/vllm@sha256:" + "ab" * 32
    assert "sha256:" + "ab" * 32 in learned().text(line)
    assert "<redacted>" not in learned().text("https://registry.example.org:5000/team/vllm@sha256:0123")


def test_a_dot_folder_under_a_home_folder_is_no_user_name():
    # with HOME=/srv/ci/home, pip's user site /srv/ci/home/.local/lib/... taught ".local" as a login name: every
    # ".local" of the report became "<user>" (/root/.local/share, ~/.local/state); a login name never starts with a dot
    # (/home/.snapshots of snapper, /home/.ecryptfs of an encrypted home are folders, not users)
    r = redactor_for({"target": {"python": "/srv/ci/home/.local/bin/python3"},
                      "packages": {"x": {"location": "/home/.snapshots/1/snapshot/venv"}}})
    assert r.text("/root/.local/share/x and /srv/ci/home/.local/lib") == "/root/.local/share/x and /srv/ci/home/.local/lib"
    assert r.text("/home/.snapshots/1 and %2Fhome%2F.cache") == "/home/.snapshots/1 and %2Fhome%2F.cache"
    assert r.text("/home/alice/.local") == "/home/<user>/.local"  # a name after /home/ still goes
