"""Every reader of JSON that sparkdoctor did not write (a child's output, a server's answer, a container CLI's, a file
another program wrote) parses it with inputs.json_answer, which names the three ways an answer is no JSON.

A number of more digits than int() reads (sys.get_int_max_str_digits: 4,300 by default) makes json.loads raise a plain
ValueError, not a JSONDecodeError: readers that took every ValueError for "not JSON" said the answer held no JSON (or
"gave no answer", "printed no record"), readers that caught JSONDecodeError alone stopped on it with a traceback, and the
file readers printed Python's own advice (`use sys.set_int_max_str_digits()`). Each reader here is fed a 5,000-digit
number and a line that is no JSON through its own entry point (a script as the subprocess, a server on 127.0.0.1, a
file); each says in one line which it was, in its own words for the rest."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from sparkdoctor import proc
from sparkdoctor.inputs import (
    NUMBER_TOO_LONG,
    NotJSON,
    NumberTooLong,
    json_answer,
    json_lines,
)

DIGITS = "9" * 5000
LONG = '{"x": ' + DIGITS + ', "kernel": "nvfp4-mma-tile", "stage": "init"}'
NOT_JSON = "hello from a .pth file"


def _done(stdout: str, returncode: int = 0) -> proc.ProcResult:
    return proc.ProcResult(["p"], returncode, stdout + "\n", "", 0.1)


def _message(call) -> str:
    """The one line a reader said: its error's text, or what it returned."""
    try:
        return str(call())
    except Exception as exc:  # every reader's own error class
        return str(exc)


# ---- the helper -------------------------------------------------------------------------------------------------

def test_the_three_ways_an_answer_is_no_json_are_named():
    with pytest.raises(NumberTooLong) as long_one:
        json_answer(LONG)
    assert str(long_one.value) == NUMBER_TOO_LONG
    with pytest.raises(NotJSON) as not_json:
        json_answer(NOT_JSON)
    assert str(not_json.value).startswith("is not valid JSON (Expecting value") and not isinstance(not_json.value, NumberTooLong)
    with pytest.raises(NotJSON, match="is nested too deeply to read"):
        json_answer("[" * 100_000 + "]" * 100_000)
    with pytest.raises(NotJSON, match="is not valid JSON"):
        json_answer(b"\xff\xfe")  # bytes that are no UTF-8: a UnicodeDecodeError before
    assert json_answer('{"x": ' + "9" * 4300 + "}")["x"] > 0  # at the limit: read
    assert isinstance(NotJSON("x"), ValueError)  # the readers' `except ValueError` still holds


def test_json_lines_passes_over_lines_and_says_whether_one_had_a_number_too_long():
    assert json_lines(['{"a": 1}', NOT_JSON, "[2]"]) == ([{"a": 1}, [2]], False)
    assert json_lines([LONG, '{"a": 1}']) == ([{"a": 1}], True)


# ---- a script as the subprocess, a CLI that prints the answer --------------------------------------------------------

@pytest.fixture
def docker(tmp_path):
    """A `docker` that prints the answer written to it, whatever it is asked."""
    answer = tmp_path / "answer"
    cli = tmp_path / "bin" / "docker"
    cli.parent.mkdir()
    cli.write_text(f"#!/bin/sh\ncat {answer}\n")
    cli.chmod(0o755)
    return SimpleNamespace(path=str(cli), answer=answer)


def _probe(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.targets.local import PythonTarget, parse_json_probe, probe_entry

    return _message(lambda: parse_json_probe(PythonTarget(sys.executable, "--python"), probe_entry("target_env"), _done(text)))


def _cutedsl(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.collect import cutedsl

    return cutedsl.interpret("nvfp4-mma-tile", "sm_121a", _done(text))["detail"]


def _gpu_helper(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.collect import gpu

    return str(gpu.stage_records(_done(text, 1), {"init": "the driver"})[1])


def _gpu_runner(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.kernels import gpu_run

    monkeypatch.setattr(gpu_run.proc, "run", lambda *a, **k: _done(text))
    return gpu_run._run_child([{"id": "a"}])[0]["error"]


def _container_file_op(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.targets import container_files

    files = object.__new__(container_files.ContainerFiles)
    files.where = "container c"
    monkeypatch.setattr(files, "_argv", lambda *a: ["true"], raising=False)
    monkeypatch.setattr(container_files, "reaped", lambda res, token: res)
    monkeypatch.setattr(container_files.proc, "run", lambda *a, **k: _done(text))
    return _message(lambda: files._call({"op": "info"}, 5.0))


def _container_compile(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.collect.toolkits_container import container_runner

    target = SimpleNamespace(python="python3", run_command=lambda *a, **k: _done(text))
    ptx = tmp_path / "k.ptx"
    ptx.write_text("//")
    done, _ = container_runner(target)(SimpleNamespace(path="/usr/local/cuda/bin/ptxas"), "sm_121a", ptx, tmp_path / "k.cubin", 5.0)
    return done.stderr


def _scratch_probe(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.whatif import hypothetical

    monkeypatch.setattr(hypothetical.proc, "run", lambda *a, **k: _done(text))
    return _message(lambda: hypothetical.ScratchSite.probe(SimpleNamespace(path=tmp_path), "capabilities"))


def _pip_report(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.facts import Facts
    from sparkdoctor.whatif.resolve import resolve_upgrade

    target = SimpleNamespace(shares_files=False, run_script=lambda *a, **k: _done(text))
    return _message(lambda: resolve_upgrade(target, "python3", ["six==1.16.0"], Facts()))


def _container_inspect(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.targets.container_inspect import inspect_container

    docker.answer.write_text(text)
    return _message(lambda: inspect_container([docker.path], "c"))


def _image_inspect(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.targets.container_inspect import image_facts

    docker.answer.write_text(text)
    return _message(lambda: image_facts([docker.path], "sha256:" + "a" * 64))


def _launch_image(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.serve.container_launch import image_record

    docker.answer.write_text(text)
    return _message(lambda: image_record([docker.path], "vllm:tiny"))


def _container_site(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.mods.trees import ContainerTree

    target = SimpleNamespace(name="c", python="python3", run_command=lambda *a, **k: _done(text))
    return _message(lambda: ContainerTree(target).dirs())


def _preflight_gate(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.integrations.preflight import Gate, reasons_of

    return " | ".join(reasons_of(Gate("mods check", ["sparkdoctor", "mods", "check"]), _done(text, 2), "error"))


def _stream_line(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.bench import client

    return client._account(client.Sample(ok=False), "chat", [(0.01, text.encode())], 0.0).error


# ---- a file another program wrote --------------------------------------------------------------------------------

def _daemon_json(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.collect import host_health

    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/daemon.json").write_text(text)
    return host_health.docker_runtime(tmp_path)["error"]


def _speculative_flag(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.memory import need

    return _message(lambda: need._speculative(SimpleNamespace(source_path="r.toml"), ["vllm", "serve", "--speculative-config", text]))


def _config_json(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.audit.checkpoint import read_json

    (tmp_path / "config.json").write_text(text)
    return _message(lambda: read_json(tmp_path / "config.json"))


def _safetensors_header(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.audit.safetensors import read_header

    header = ("{" + text.lstrip("{")).encode() if text.startswith("{") else b"{" + text.encode()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return _message(lambda: read_header(tmp_path / "m.safetensors"))


def _bench_cell(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.bench import cell

    (tmp_path / "cell.json").write_text(text)
    return _message(lambda: cell.read(tmp_path / "cell.json"))


def _bounds_document(text, tmp_path, monkeypatch, docker):
    from sparkdoctor.commands.matrix import _bounds_document

    (tmp_path / "bounds.json").write_text(text)
    return _message(lambda: _bounds_document(tmp_path / "bounds.json"))


READERS = [_probe, _cutedsl, _gpu_helper, _gpu_runner, _container_file_op, _container_compile, _scratch_probe, _pip_report,
           _container_inspect, _image_inspect, _launch_image, _container_site, _preflight_gate, _stream_line, _daemon_json,
           _speculative_flag, _config_json, _safetensors_header, _bench_cell, _bounds_document]


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__.strip("_"))
def test_each_reader_says_a_number_was_too_long(reader, tmp_path, monkeypatch, docker):
    said = reader(LONG, tmp_path, monkeypatch, docker)
    assert NUMBER_TOO_LONG in said and "\n" not in said and "Traceback" not in said, said
    assert "set_int_max_str_digits" not in said and DIGITS[:50] not in said, said


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__.strip("_"))
def test_each_reader_keeps_its_own_words_for_no_json(reader, tmp_path, monkeypatch, docker):
    said = reader(NOT_JSON, tmp_path, monkeypatch, docker)
    assert NUMBER_TOO_LONG not in said and "\n" not in said and "Traceback" not in said, said


# ---- a server on 127.0.0.1 -------------------------------------------------------------------------------------------

class _Server:
    """Answers GET and POST at each path with the body set for it (200, application/json); 404 elsewhere."""

    def __init__(self, pages: dict[str, bytes]):
        pages_ = pages

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = pages_.get(self.path.split("?")[0])
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body or b"")))
                self.end_headers()
                self.wfile.write(body or b"")

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_server_listing_its_models_with_a_number_too_long_is_said_so_not_serving_none():
    """Before: `bench --url` said the server "serves 0 models (none)"."""
    from sparkdoctor.bench.http import HttpError, run
    from sparkdoctor.bench.server import detect

    with _Server({"/v1/models": LONG.encode()}) as server, pytest.raises(HttpError) as info:
        run(detect(server.url))
    assert str(info.value) == f"GET /v1/models: its answer {NUMBER_TOO_LONG}"
    with _Server({"/v1/models": NOT_JSON.encode()}) as server:
        assert run(detect(server.url)).models == []  # no JSON: a generic server, as before


def test_what_a_server_says_of_itself_names_the_number_too_long():
    from sparkdoctor.bench import served

    with _Server({"/v1/models": LONG.encode(), "/server_info": LONG.encode()}) as server:
        unknown = served.read(server.url, "m", "0.32.0", True)["unknown"]
    assert f"the model's entry: /v1/models answer {NUMBER_TOO_LONG}" in unknown, unknown
    assert f"the server's engine arguments: /server_info's answer {NUMBER_TOO_LONG}" in unknown, unknown


def test_a_completion_answer_with_a_number_too_long_is_said_so():
    """Before: Python's own ValueError words (`Exceeds the limit (4300 digits)... use sys.set_int_max_str_digits()`)."""
    from sparkdoctor.bench.correctness import parse
    from sparkdoctor.bench.http import post_json, run

    with _Server({"/v1/completions": LONG.encode()}) as server:
        status, body = run(post_json(server.url, "/v1/completions", {"prompt": "x"}, 5.0, 1 << 20))
    with pytest.raises(ValueError) as info:
        parse(status, body)
    assert str(info.value) == f"the answer {NUMBER_TOO_LONG}"


def test_a_package_index_page_with_a_number_too_long_is_said_so():
    from sparkdoctor.released import RemoteError
    from sparkdoctor.released.http import Client
    from sparkdoctor.released.index import Index
    from tests.released_server import Registry

    with Registry() as reg:
        reg.pages["vllm"] = b'{"files": [], "meta": ' + DIGITS.encode() + b"}"
        with pytest.raises(RemoteError) as info:
            Index(Client(timeout=10), reg.url).versions("vllm")
    assert str(info.value).endswith(f": its answer {NUMBER_TOO_LONG}") and "\n" not in str(info.value), info.value


def test_the_answers_that_only_steer_stay_quiet_and_raise_nothing(tmp_path, docker):
    """Readers whose answer only steers (a container's state while it runs, the leftovers swept, the runtimes docker
    knows, the sockets a container holds, a node's batch split into its probes) go on without it, as for any answer
    that is no JSON: none of them may stop on a number too long."""
    from sparkdoctor.fleet.target import _parts
    from sparkdoctor.serve import binding, container_launch

    docker.answer.write_text(LONG)
    assert binding.wide_inside([docker.path]) is None
    assert container_launch.host_gpu_setup([docker.path])[1] == []
    assert _parts(json.dumps({"x": 1})[:-1] + ", " + '"y": ' + DIGITS + "}", 1) == (None, None)


# ---- longer numbers and deep nesting, through the readers of a container CLI's, an interpreter's, a server's answer --

LONGER = '[{"Id": "c", "x": ' + "9" * 10_000 + "}]"
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("answer", [LONGER, DEEP], ids=["10000-digits", "deep"])
def test_hostile_answers_end_bounded_in_the_container_site_and_server_readers(answer, tmp_path, monkeypatch, docker):
    """Each reader turns the answer into its own outcome (one line, or "no answer" where the answer only steers) and
    never a traceback; nesting thousands deep is no RecursionError let out."""
    from sparkdoctor.bench.http import HttpError, run
    from sparkdoctor.bench.server import detect
    from sparkdoctor.serve import container_launch

    docker.answer.write_text(answer)
    assert container_launch.sweep_leftovers([docker.path]) == []  # ps and inspect both answered with it: nothing removed
    said = _launch_image(answer, tmp_path, monkeypatch, docker)
    assert "\n" not in said and "Traceback" not in said and "9" * 50 not in said, said
    said = _container_site(answer, tmp_path, monkeypatch, docker)
    assert said.startswith("container c (python3): its interpreter ") and "9" * 50 not in said, said
    with _Server({"/v1/models": answer.encode()}) as server:
        try:
            found = run(detect(server.url)).models
        except HttpError as exc:  # the number too long: said so
            assert str(exc) == f"GET /v1/models: its answer {NUMBER_TOO_LONG}" and answer is LONGER
        else:  # too deep: no JSON, a generic server as for any answer that is none
            assert found == [] and answer is DEEP
