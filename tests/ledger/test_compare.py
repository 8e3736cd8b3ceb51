"""history --compare: what changed in the toolchain (real Facts snapshots) and in the numbers; unlike runs refused."""

import json
from pathlib import Path

import pytest

from sparkdoctor.bench.workload import WorkloadError, from_recipe
from sparkdoctor.ledger import Ledger, RunRecord
from sparkdoctor.ledger.compare import compare_runs

FACTS = Path(__file__).resolve().parents[1] / "data" / "facts"


def _summary(tps, ttft):
    return {"levels": [{"concurrency": 1, "headline": {"decode_tps_per_stream": tps},
                        "client": {"output_tps": {"median": tps * 0.9}, "ttft_s": {"median": ttft}}, "server": None}],
            "headline": {"decode_tps_per_stream": tps}}


def _store(led, facts_name, tps, bench_version=1, argv=("vllm", "serve", "m")):
    from sparkdoctor.facts import Facts

    facts = Facts.load(FACTS / f"{facts_name}.json")
    return led.add_run(RunRecord(recipe={"name": "r", "argv": list(argv), "env": {}, "model": "m"}, base_url="u",
                                 model="m", server={}, facts=facts.to_dict(), fingerprint=facts.fingerprint(),
                                 bench_version=bench_version, tool_version="0", workload={"max_tokens": 64},
                                 summary=_summary(tps, 0.05)))


def test_same_recipe_two_toolchains(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        a, b = _store(led, "gb10-broken", 40.0), _store(led, "nogpu-clean", 120.0)
        cmp = compare_runs(led.run(a), led.run(b))
    assert cmp["comparable"] and not any("different recipes" in n for n in cmp["notes"])
    changed = {row["what"] for row in cmp["toolchain"]}
    assert changed and any(w.startswith("packages.") or w in ("arch", "driver") for w in changed)
    head = next(r for r in cmp["numbers"] if r["figure"].startswith("decode"))
    assert (head["a"], head["b"], head["ratio"]) == (40.0, 120.0, 3.0)
    ttft = next(r for r in cmp["numbers"] if r["figure"].startswith("TTFT"))
    assert ttft["a"] == pytest.approx(50.0)


def test_other_bench_versions_get_no_ratio_and_other_recipes_are_named(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        a = _store(led, "gb10-broken", 40.0)
        b = _store(led, "gb10-broken", 50.0, bench_version=2, argv=("vllm", "serve", "m", "--enforce-eager"))
        cmp = compare_runs(led.run(a), led.run(b))
    assert not cmp["comparable"] and all(r["ratio"] is None for r in cmp["numbers"])
    assert any("not comparable" in n for n in cmp["notes"]) and any("different recipes" in n for n in cmp["notes"])
    assert cmp["toolchain"] == [] and "same toolchain fingerprint" in cmp["notes"]
    json.dumps(cmp)


def test_a_recipes_workload_maps_and_unknown_fields_name_the_recipe():
    w = from_recipe({"max_tokens": 256, "concurrency": [1], "repeats": 5, "prompt_tokens": 512}, "recipe x.toml")
    assert (w.max_tokens, w.concurrency, w.rounds, w.prompt_words) == (256, (1,), 5, 512)
    assert from_recipe({"repeats": 5}, "r", rounds=2).rounds == 2  # the command line wins
    with pytest.raises(WorkloadError, match=r"recipe x.toml: workload: unknown field 'warmpu'"):
        from_recipe({"warmpu": 1}, "recipe x.toml")


def test_a_workload_typo_lists_the_names_a_recipe_may_use():
    """`max_token = 32` in a recipe's [workload] listed only bench's own names ("rounds", "prompt_words"), not
    `repeats` and `prompt_tokens`, which recipes/README.md writes and which a recipe may use."""
    with pytest.raises(WorkloadError) as caught:
        from_recipe({"max_token": 32, "repeats": 2}, "my.toml")
    known = str(caught.value).split("(known: ", 1)[1]
    assert "repeats" in known and "prompt_tokens" in known and "max_tokens" in known, caught.value
