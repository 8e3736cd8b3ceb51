import time

from sparkdoctor.collect import Collector, CollectorError, Context, run_collectors
from sparkdoctor.facts import Facts
from sparkdoctor.targets.local import PythonTarget


def ctx(timeout=600.0) -> Context:
    # a collector's limit is wall-clock: the ones that answer at once get 600 s, the hang tests set short ones
    return Context(target=PythonTarget("/usr/bin/python3", "test"), facts=Facts(), timeout=timeout)


def test_results_land_in_facts_and_dicts_merge():
    c = ctx()
    run_collectors(
        c,
        [
            Collector("a", lambda ctx: {"env": {"A": "1"}, "kernels": {"p1": {"status": "ok"}}}),
            Collector("b", lambda ctx: {"kernels": {"p2": {"status": "fail"}}}),
        ],
    )
    assert c.facts.env == {"A": "1"}
    assert set(c.facts.kernels) == {"p1", "p2"}
    assert c.facts.errors == []
    assert set(c.facts.timings_ms) == {"a", "b"}


def test_needs_order_and_scratch_handoff():
    seen = []

    def first(ctx):
        ctx.scratch["x"] = 42
        seen.append("first")
        return {}

    def second(ctx):
        seen.append(("second", ctx.scratch.get("x")))
        return {}

    run_collectors(ctx(), [Collector("second", second, needs=("first",)), Collector("first", first)])
    assert seen == ["first", ("second", 42)]


def test_failure_and_hang_are_reported_not_fatal():
    def boom(ctx):
        raise CollectorError("NVML: driver not loaded")

    def bug(ctx):
        return 1 / 0

    def hang(ctx):
        time.sleep(600)  # a daemon thread: nothing waits for it
        return {"env": {}}

    c = ctx()
    started = time.monotonic()
    run_collectors(
        c,
        [
            Collector("gpu", boom),
            Collector("buggy", bug),
            Collector("slow", hang, timeout=0.3),
            Collector("fine", lambda ctx: {"host": {"machine": "aarch64"}}),
        ],
    )
    assert time.monotonic() - started < 300  # not the 600 s hang; far from a loaded machine's stretch
    errors = {e["collector"]: e["error"] for e in c.facts.errors}
    assert errors["gpu"] == "NVML: driver not loaded"
    assert errors["buggy"].startswith("ZeroDivisionError")
    assert errors["slow"] == "timed out after 0.3s"
    assert c.facts.env is None, "a timed-out collector leaves its fields unknown"
    assert c.facts.host == {"machine": "aarch64"}


def test_unmeetable_needs_do_not_spin():
    c = ctx()
    run_collectors(c, [Collector("x", lambda ctx: {}, needs=("y",)), Collector("y", lambda ctx: {}, needs=("x",))])
    assert {e["collector"] for e in c.facts.errors} == {"x", "y"}


def test_a_collector_returning_an_unknown_field_is_its_error_not_a_crash():
    # run_collectors is documented "never raise": a wrong key used to raise AttributeError out of it.
    c = ctx()
    run_collectors(
        c,
        [
            Collector("wrong", lambda ctx: {"gpu": [], "host": {"machine": "x"}}),
            Collector("notdict", lambda ctx: ["env"]),
            Collector("fine", lambda ctx: {"env": {"A": "1"}}),
        ],
    )
    errors = {e["collector"]: e["error"] for e in c.facts.errors}
    assert "unknown Facts field(s): gpu" in errors["wrong"]
    assert c.facts.host is None, "half a result is not kept"
    assert "not a dict" in errors["notdict"]
    assert c.facts.env == {"A": "1"}


def test_the_run_deadline_bounds_every_collector():
    def hang(ctx):
        time.sleep(900)  # a daemon thread: nothing waits for it
        return {}

    c = ctx(timeout=600)
    c.deadline = time.monotonic() + 0.5
    started = time.monotonic()
    run_collectors(
        c,
        [
            Collector("slow", hang, timeout=600),
            Collector("after", lambda ctx: {"env": {}}, needs=("slow",)),
            Collector("fine", lambda ctx: {"host": {}}),
        ],
    )
    assert time.monotonic() - started < 300  # the 0.5 s deadline, not the 600 s timeout; far from a loaded machine's stretch
    errors = {e["collector"]: e["error"] for e in c.facts.errors}
    assert errors["slow"].startswith("timed out after") and "--timeout" in errors["slow"]
    assert errors["after"] == "not run: the run's time budget (--timeout) ran out"
    assert c.facts.host == {} and c.facts.env is None
