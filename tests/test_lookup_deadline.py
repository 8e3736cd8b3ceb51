"""A name lookup that never answers ends at the network path's own time limit, one line, never a hang.

The lookup is made to hang in a real subprocess: a sitecustomize replaces socket.getaddrinfo (and gethostbyname)
for names under .hang.test with a wait that, like glibc's resolver, does not return on a signal (so SIGALRM,
the run's --timeout, cannot end it either). Nothing reaches the network. Each child runs under a CPU limit; the
outer timeout is only a hang guard: the assertion is that the command ended by its own limit, with its message.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from tests.hostile import hang_guard

FAKE_RESOLVER = textwrap.dedent('''
    import signal, socket, time
    _real_getaddrinfo, _real_gethostbyname = socket.getaddrinfo, socket.gethostbyname

    def _hang():
        # glibc's resolver goes on waiting through a signal: block them, so no Python handler runs here either
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT, signal.SIGTERM})
        while True:
            time.sleep(3600)

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".hang.test"):
            _hang()
        return _real_getaddrinfo(host, *args, **kwargs)

    def gethostbyname(host):
        if host.endswith(".hang.test"):
            _hang()
        return _real_gethostbyname(host)

    socket.getaddrinfo, socket.gethostbyname = getaddrinfo, gethostbyname
''')


@pytest.fixture
def hanging_dns(tmp_path):
    """The environment of a child whose lookups of *.hang.test never answer."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(FAKE_RESOLVER)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
            "SPARKDOCTOR_DATA_DIR": str(tmp_path / "data"), "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}


def _cpu_limited(seconds: int):
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120,  # a hang guard only
                          preexec_fn=_cpu_limited(60))


def test_the_fake_resolver_hangs_for_real(hanging_dns):
    """The premise: in the child, a plain lookup of the name does not come back (the guard ends it)."""
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", "import socket; socket.getaddrinfo('x.hang.test', 80)"],
                       env=hanging_dns, capture_output=True, timeout=3, preexec_fn=_cpu_limited(60))


def test_the_released_file_client_gives_up_a_lookup_at_its_timeout(hanging_dns):
    """`matrix update`, `track`, `whatif` and `mods --release` read through this client: its deadline timer shut
    only a socket, and during the lookup there is none yet."""
    code = textwrap.dedent('''
        from sparkdoctor.released.http import Client, RemoteError
        try:
            Client(timeout=1.0).get("http://index.hang.test/simple/vllm/")
        except RemoteError as exc:
            print(exc)
            raise SystemExit(3)
    ''')
    done = _run(["-c", code], hanging_dns)
    assert done.returncode == 3, done.stderr
    assert "http://index.hang.test/simple/vllm/" in done.stdout and "took more than 1 s" in done.stdout, done.stdout
    assert done.stdout.count("\n") == 1, done.stdout


def test_the_released_file_client_ends_a_lookup_at_the_runs_time_limit(hanging_dns):
    """whatif --timeout: the run's limit (proc.time_left) bounds the lookup too, though the client's own wait is 600 s."""
    code = textwrap.dedent('''
        from sparkdoctor import proc
        from sparkdoctor.released.http import Client, RemoteError
        import time
        proc.set_deadline(time.monotonic() + 1.0)
        try:
            Client(timeout=600).get("http://index.hang.test/simple/vllm/")
        except RemoteError as exc:
            print(exc)
            raise SystemExit(3)
    ''')
    done = _run(["-c", code], hanging_dns)
    assert done.returncode == 3 and "http://index.hang.test/simple/vllm/" in done.stdout, (done.stdout, done.stderr)


def test_a_ray_address_whose_name_never_resolves_ends_at_the_connect_timeout(hanging_dns):
    done = _run(["-m", "sparkdoctor", "fleet", "check", "--ray", "gcs.hang.test:6379", "--node-timeout", "5"], hanging_dns)
    assert done.returncode == 3, done.stderr
    assert "--ray gcs.hang.test:6379: cannot reach the cluster's GCS" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_bench_url_whose_name_never_resolves_is_not_this_machine(hanging_dns):
    """bench --url asks whether the host is this machine before it measures: that lookup is bounded too."""
    code = "from sparkdoctor.bench.behind import is_local; print(is_local('spark.hang.test'))"
    done = _run(["-c", code], hanging_dns)
    assert done.returncode == 0 and done.stdout == "False\n", (done.stdout, done.stderr)


def test_bench_url_whose_name_never_resolves_ends_at_its_request_timeout(hanging_dns, tmp_path):
    """aiohttp looked the name up in asyncio's executor, whose thread asyncio.run waits for at its end: bench hung."""
    done = _run(["-m", "sparkdoctor", "bench", "--url", "http://spark.hang.test:8000", "--python", sys.executable,
                 "--no-store", "--rounds", "1", "--concurrency", "1"], hanging_dns)
    assert done.returncode == 4, done.stderr
    assert "http://spark.hang.test:8000: GET /v1/models: no answer within 5s" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


# sparkrun's is_local_host, as sparkrun 0.4.2 answers it (not installed here: it needs Python 3.12): a name lookup
FAKE_SPARKRUN_NET = textwrap.dedent('''
    import socket

    def is_local_host(host):
        return host == "localhost" or socket.gethostbyname(host).startswith("127.")
''')


def test_the_sparkrun_gate_gives_up_on_a_host_whose_name_never_resolves(hanging_dns, tmp_path):
    """The plugin asks sparkrun whether every host of the plan is this machine before it sizes the memory: a host
    whose name never answered held the launch's preparation for good. Now, past the item's timeout (at most 10 s), the
    memory is not judged and one line says why; the gates still run."""
    net = tmp_path / "site" / "sparkrun" / "utils"
    net.mkdir(parents=True)
    for init in (net.parent / "__init__.py", net / "__init__.py"):
        init.write_text("")
    (net / "net.py").write_text(FAKE_SPARKRUN_NET)
    code = textwrap.dedent('''
        from types import SimpleNamespace
        from sparkdoctor.integrations import preflight, sparkrun_plugin as plugin
        plugin.judge = lambda *a, **k: preflight.Verdict()
        recipe = SimpleNamespace(name="r", source_path=None, container=None, mods=[], model="org/toy",
                                 plugin_items={"sparkdoctor": {"timeout": 1}},
                                 to_dict=lambda **k: {"model": "org/toy", "runtime": "vllm"})
        plan = SimpleNamespace(recipe=recipe, host_list=["localhost", "spark2.hang.test"])
        print(plugin.preflight(SimpleNamespace(plan=plan, options=SimpleNamespace(overrides={})), None))
    ''')
    done = _run(["-c", code], hanging_dns)
    assert done.returncode == 0, done.stderr
    assert ("sparkdoctor: memory not judged: sparkrun's is_local_host did not say within 1 s whether spark2.hang.test "
            "is this machine") in done.stderr, done.stderr
    assert "'allowed': False" in done.stdout and "every gate passed" in done.stderr, (done.stdout, done.stderr)


def test_a_lookup_hands_back_its_answer_and_its_error():
    import socket

    from sparkdoctor.lookup import getaddrinfo

    # the limit is wall-clock: answers that come at once must not time out on a loaded machine
    assert {row[4][0] for row in getaddrinfo("127.0.0.1", 80, 600.0)} == {"127.0.0.1"}
    with pytest.raises(socket.gaierror):
        getaddrinfo("127.0.0.1", "no-such-service-here", 600.0)  # refused locally: no name server asked


@pytest.fixture
def stuck_names(monkeypatch):
    """socket.getaddrinfo for names under .stuck.test waits until the test ends (then fails): the names asked, in order."""
    release = threading.Event()
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, str) and host.endswith(".stuck.test"):
            asked.append(host)
            release.wait()
            raise socket.gaierror(socket.EAI_AGAIN, "gave up at last")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield asked
    release.set()


def _lookup_threads() -> int:
    return sum(t.name == "sparkdoctor-lookup" and t.is_alive() for t in threading.enumerate())


def test_a_name_asked_again_while_its_lookup_is_unanswered_waits_on_that_lookup(stuck_names):
    """matrix track asks the index once per package: on a name that never answered, each request started one more
    thread stuck in the resolver and waited its full 60 s again (5 threads, 5 min, when it was stopped)."""
    from sparkdoctor import lookup

    before = _lookup_threads()
    for _ in range(20):
        with pytest.raises(TimeoutError, match="looking up the name 'index.stuck.test' took more than"):
            lookup.getaddrinfo("index.stuck.test", 443, 0.01)
    assert stuck_names == ["index.stuck.test"] and _lookup_threads() == before + 1
    lookup.start("index.stuck.test", 443).began -= 3600  # that lookup began an hour ago
    with hang_guard(60):  # a hang guard only: the wait is counted from when the lookup began, so none is left
        with pytest.raises(TimeoutError):
            lookup.getaddrinfo("index.stuck.test", 443, 600)
    assert stuck_names == ["index.stuck.test"]


def test_bench_waiters_that_give_up_on_a_shared_lookup_leave_it_to_the_others(stuck_names):
    """bench's resolver waits through asyncio.wrap_future, which cancels the lookup when its wait ends: on a lookup
    another waiter had already joined that raised RuntimeError ("Future in unexpected state") out of the run."""
    import asyncio

    from sparkdoctor.bench.http import _Resolver

    async def twice() -> list[str]:
        said = []
        for _ in range(2):
            try:
                await _Resolver(0.01).resolve("spark.stuck.test", 8000)
            except OSError as exc:
                said.append(str(exc))
        return said

    assert asyncio.run(twice()) == ["looking up the name 'spark.stuck.test' took more than 0.01 s"] * 2
    assert stuck_names == ["spark.stuck.test"]


def test_bench_keeps_the_scope_of_a_link_local_ipv6_address(monkeypatch):
    """A bench URL whose name answers with a link-local IPv6 address (fe80::/10) needs the address's scope to connect:
    without it aiohttp's connect failed with EINVAL ("Cannot connect to host ... [Invalid argument]", seen in a network
    namespace whose lo had fe80::1). aiohttp's own resolver writes it as fe80::1%IFNAME; so does bench's."""
    import asyncio

    from sparkdoctor.bench.http import _Resolver

    lo = socket.if_nametoindex("lo")
    rows = {"spark.ll.test": [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fe80::1", 8000, 0, lo))],
            "spark.v6.test": [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2001:db8::1", 8000, 0, 0))],
            "spark.v4.test": [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.0.2.1", 8000))]}
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *args, **kwargs: rows[host])
    hosts = {name: asyncio.run(_Resolver(5).resolve(name, 8000, socket.AF_UNSPEC))[0]["host"] for name in rows}
    assert hosts == {"spark.ll.test": "fe80::1%lo", "spark.v6.test": "2001:db8::1", "spark.v4.test": "192.0.2.1"}


def test_a_report_learns_this_machines_names_without_waiting_on_a_reverse_lookup_that_never_answers(monkeypatch):
    """`report` (and `mods --publish`) learn this machine's names to redact them: socket.getfqdn is a reverse lookup,
    and one that never answered held `report --timeout 20` for good (killed after 12 minutes). Now it is given up
    after a few seconds; the host name is still learned."""
    from sparkdoctor import anonymize

    release = threading.Event()

    def gethostbyaddr(name):
        release.wait()
        raise socket.herror(1, "gave up at last")

    monkeypatch.setattr(socket, "gethostbyaddr", gethostbyaddr)
    monkeypatch.setattr(socket, "gethostname", lambda: "spark-7f3a")
    monkeypatch.setattr(anonymize, "FQDN_TIMEOUT", 0.01, raising=False)
    redactor = anonymize.Redactor()
    try:
        with hang_guard(60):  # a hang guard only
            redactor.learn_local()
    finally:
        release.set()
    assert redactor.text("ssh spark-7f3a.lab") == "ssh <host>.lab"


@pytest.mark.parametrize("host", ["a" * 64, "spark..local"])
def test_a_host_name_the_resolver_cannot_encode_is_one_line(tmp_path, host):
    """A host with a part longer than 63 characters or an empty one: Python's getaddrinfo raises UnicodeError (from its
    idna codec), not OSError; bench --url and fleet check --ray ended in an internal error."""
    env = {**os.environ, "SPARKDOCTOR_STATE_DIR": str(tmp_path / "state")}
    bench = _run(["-m", "sparkdoctor", "bench", "--url", f"http://{host}:8000", "--python", sys.executable,
                  "--no-store", "--rounds", "1", "--concurrency", "1"], env)
    ray = _run(["-m", "sparkdoctor", "fleet", "check", "--ray", f"{host}:6379", "--node-timeout", "5"], env)
    for done, code in ((bench, 4), (ray, 3)):
        assert "internal error" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert done.returncode == code and "not a host name" in done.stderr, (done.returncode, done.stderr)
