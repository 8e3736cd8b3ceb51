"""`fleet check --recipe` (the command passes judge_fleet to sparkdoctor.fleet): one launch sized once, split per node by its parallel sizes, and judged on each node
against that node's memory now (docs/memory.md, "Every node of a multi-node launch").

The need is computed once, here, from the recipe as its runner resolves it and the checkpoint's headers read on
this machine (sparkrun and eugr's launch scripts sync the same model folder to every node). vLLM's split, per rank:
- tensor parallel (TP): every layer's linear weights, the embedding and the LM head are sharded over the TP ranks
  (ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding); each rank caches max(1, KV heads // TP) of the
  KV heads (ModelConfig.get_num_kv_heads); an MLA latent is cached whole on every rank;
- pipeline parallel (PP): the layers are split into PP stages (vllm/distributed/utils.get_pp_indices): a rank holds
  at most ceil(layers / PP) of them, their weights and their KV cache.
Weights per rank are the headers' exact bytes / (TP x PP): an estimate (norms, biases, the first stage's embedding
and the last stage's LM head are not placed exactly). KV cache per rank is computed as above. The reserve
(activations, sampler, CUDA graphs, CUDA context) is kept whole on every rank: each rank profiles, warms its
sampler and captures its graphs (a conservative estimate). The TP x PP ranks are spread over the nodes,
ceil(ranks / nodes) on each: one a node on Sparks (one GPU each).

The launch is one setting for all nodes: the proposal is the smallest of each node's largest settings that fit,
names the node that decided each, and is judged again on every node before it is proposed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor.facts import Facts
from sparkdoctor.memory.have import ContainerMemory, Have, Holder, kib_bytes
from sparkdoctor.memory.need import (
    Need,
    NeedError,
    Part,
    Setting,
    launches_vllm,
    parallel_size,
)
from sparkdoctor.memory.verdict import (
    FITS,
    FITS_WITH,
    NO_FIT,
    UNKNOWN,
    Verdict,
    gib,
    judge,
)

# vLLM's batch defaults depend on the GPU's memory (70 GiB or more); the need is sized once, as on a GB10
# (MemTotal 119.7 GiB): every node of a Spark fleet is one
SPARK_MEMTOTAL = 125_511_680 * 1024
SEVERITY = {FITS: "info", FITS_WITH: "warn", NO_FIT: "error", UNKNOWN: "info"}
KEYS = ("gpu_memory_utilization", "kv_cache_memory_bytes", "max_model_len", "max_num_seqs")


@dataclass
class Launch:
    """The launch sized once on this machine: the whole model's need and the recipe's parallel sizes."""

    recipe: str
    model: str
    need: Need
    tensor_parallel: int
    pipeline_parallel: int
    layers: int
    kv_heads: int
    mla: bool
    container: str | None = None  # the recipe's image: the server starts in its runtime's cgroup, not the shell's


@dataclass
class FleetFit:
    launch: Launch
    need: Need  # one node's share of the launch
    ranks_per_node: int
    rules: list[str]
    verdicts: dict[str, Verdict]  # node name -> its verdict
    proposal: dict[str, float] = field(default_factory=dict)  # the settings that fit on every node
    decided_by: dict[str, str] = field(default_factory=dict)  # setting -> the node whose room decided it
    proposal_fits: bool | None = None  # the proposal judged again on every node

    def blocking(self) -> list[str]:
        """The nodes that refuse the launch as written: it does not fit there, or fits only with other settings
        (as bench refuses such a launch: vLLM would not start, or the box would run out)."""
        return [name for name, v in self.verdicts.items() if v.outcome in (FITS_WITH, NO_FIT)]

    def outcome(self) -> str:
        order = (NO_FIT, FITS_WITH, UNKNOWN, FITS)
        found = {v.outcome for v in self.verdicts.values()}
        return next((o for o in order if o in found), UNKNOWN)

    def summary(self) -> str:
        """The need per node in one line (the console's heading)."""
        need = self.need
        return (f"{self.launch.recipe} with {self.launch.model}: {self.rules[0]}; each node needs {gib(need.part('weights'))} "
                f"of weights and {gib(need.part('kv-cache'))} of KV cache for one sequence of {need.setting('max_model_len')} "
                f"tokens, {gib(need.least())} at least")

    def to_dict(self) -> dict[str, object]:
        nodes = []
        for name, verdict in self.verdicts.items():
            doc = verdict.to_dict()
            doc.pop("need")
            nodes.append({"node": name, "severity": SEVERITY[verdict.outcome], **doc})
        launch = self.launch
        return {"recipe": launch.recipe, "model": launch.model, "outcome": self.outcome(), "blocking": self.blocking(),
                "tensor_parallel_size": launch.tensor_parallel, "pipeline_parallel_size": launch.pipeline_parallel,
                "ranks_per_node": self.ranks_per_node, "split": list(self.rules), "need": self.need.to_dict(),
                "nodes": nodes, "proposal": dict(self.proposal), "decided_by": dict(self.decided_by),
                "proposal_fits": self.proposal_fits}


def size_launch(recipe_ref: str, overrides: dict[str, str], model: str | None) -> Launch:
    """The launch `recipe_ref` describes with the checkpoint `model` (else the recipe's own), sized here. RecipeError,
    AuditError, NeedError: one line, before any node is reached."""
    from sparkdoctor.audit.checkpoint import load_checkpoint
    from sparkdoctor.audit.fromrecipe import recipe_model
    from sparkdoctor.audit.locate import resolve_model
    from sparkdoctor.audit.modelconfig import read_shape
    from sparkdoctor.memory.need import launch_need
    from sparkdoctor.recipes import load

    recipe = load(recipe_ref, overrides)
    argv = [str(a) for a in recipe.argv]
    if not launches_vllm(argv):
        raise NeedError(f"{recipe.source_path}: its command does not start vLLM (vllm serve): the memory a launch needs "
                        "is sized for vLLM only")
    folder = resolve_model(recipe_model(recipe, model, "--model PATH"))
    need = launch_need(recipe, folder, SPARK_MEMTOTAL)
    checkpoint = load_checkpoint(folder)
    shape = read_shape(checkpoint.config, checkpoint.folder / "config.json")
    tp = parallel_size(recipe, argv, ("--tensor-parallel-size", "-tp"))
    pp = parallel_size(recipe, argv, ("--pipeline-parallel-size", "-pp"))
    return Launch(recipe.name, str(checkpoint.folder), need, tp, pp, shape.layers, shape.kv_heads, bool(shape.kv_latent),
                  recipe.container)


def per_node(launch: Launch, nodes: int) -> tuple[Need, int, list[str]]:
    """(one node's need, ranks on each node, the split's rules in words)."""
    need, tp, pp = launch.need, launch.tensor_parallel, launch.pipeline_parallel
    world = tp * pp
    ranks = max(1, math.ceil(world / max(1, nodes)))
    stage = math.ceil(launch.layers / pp) / launch.layers if launch.layers else 1.0
    heads = 1.0 if launch.mla else max(1, launch.kv_heads // tp) / max(1, launch.kv_heads)
    kv, weights = heads * stage * ranks, ranks / world
    rules = [f"TP {tp} x PP {pp} = {world} rank(s) over {nodes} node(s): {ranks} rank(s) on each node",
             f"weights: / (TP x PP) of the headers' exact bytes, x {ranks} rank(s) (estimate: vLLM shards every linear "
             "layer, the embedding and the LM head over TP, and the layers over PP; norms and biases are not placed exactly)",
             ("KV cache: the MLA latent whole on every TP rank" if launch.mla else
              f"KV cache: max(1, {launch.kv_heads} KV heads // TP {tp}) = {max(1, launch.kv_heads // tp)} head(s) a rank "
              "(vLLM's get_num_kv_heads)") + f", ceil({launch.layers} layers / PP {pp}) a stage (computed)",
             f"reserve (activations, sampler, CUDA graphs, context): whole on every rank, x {ranks} (estimate)"]
    if world < nodes:
        rules.append(f"{nodes - world} node(s) hold no rank of TP x PP = {world}: every node is judged as if it held one")
    scaled = dataclasses.replace(
        need, parts=[], notes=list(need.notes), settings=dict(need.settings),
        kv_bytes_per_token=need.kv_bytes_per_token * kv, sliding_bytes_per_token=need.sliding_bytes_per_token * kv,
        state_bytes_per_seq=int(need.state_bytes_per_seq * stage / tp * ranks),
        sampler_bytes_per_seq=need.sampler_bytes_per_seq * ranks,
        fixed_kv_bytes=None if need.fixed_kv_bytes is None else need.fixed_kv_bytes * ranks)
    length = int(need.setting("max_model_len"))
    for part in need.parts:
        if part.name == "weights":
            scaled.parts.append(Part("weights", int(part.bytes * weights), "estimate",
                                     f"{gib(part.bytes)} ({part.source}) x {ranks} / {world} rank(s)"))
        elif part.name == "kv-cache" and scaled.fixed_kv_bytes is None:
            scaled.parts.append(Part("kv-cache", scaled.kv_per_seq(length) + scaled.block_bytes, "computed",
                                     f"one sequence of --max-model-len {length} tokens on this node's rank(s): "
                                     f"{scaled.kv_bytes_per_token + scaled.sliding_bytes_per_token:,.0f} bytes a token "
                                     f"({heads * stage:.3g} of the model's {need.kv_bytes_per_token + need.sliding_bytes_per_token:,.0f}"
                                     f" x {ranks} rank(s)), in blocks of {need.block_size} with the one block vLLM keeps back"))
        elif part.name == "kv-cache":
            scaled.parts.append(Part("kv-cache", scaled.fixed_kv_bytes or 0, part.how, f"{part.source}, x {ranks} rank(s)"))
        else:
            scaled.parts.append(Part(part.name, part.bytes * ranks, part.how, part.source + (f", x {ranks} rank(s)" if ranks > 1 else "")))
    return scaled, ranks, rules


def node_have(name: str, facts: Facts) -> Have:
    """A node's memory now, from its probe's answer (fleet/node.py): meminfo, the processes holding its GPU, the
    largest others, its containers. A discrete GPU's own memory is not read on nodes: its fit is unknown."""
    health = facts.host_health or {}
    mem = health.get("memory") or {}
    held = (facts.fleet or {}).get("memory")
    have = Have(f"node {name}", kib_bytes(mem.get("total_kib")), kib_bytes((held or {}).get("free_kib")),
                kib_bytes(mem.get("available_kib")), kib_bytes(mem.get("reclaimable_kib")),
                kib_bytes(mem.get("swap_total_kib")), kib_bytes(mem.get("swap_used_kib")))
    if not mem.get("total_kib"):
        have.errors.append(f"node {name} sent no readable /proc/meminfo")
    if not isinstance(held, dict):
        have.errors.append(f"node {name}'s probe sent no memory holders: what holds its memory is unknown")
        return have
    have.errors += [str(e) for e in held.get("errors") or []]
    for key in ("hugetlb_bytes", "hugetlb_free_bytes", "limit_bytes", "limit_used_bytes"):
        if isinstance(held.get(key), int) and not isinstance(held.get(key), bool) and held[key] >= 0:
            setattr(have, key, held[key])

    def holder(row: dict[str, Any]) -> Holder:
        return Holder(int(row["pid"]), row.get("name"), kib_bytes(row.get("rss_kib")), list(row.get("devices") or []),
                      container=row.get("container"))

    have.holders = sorted((holder(r) for r in held.get("holders") or []), key=lambda h: -(h.rss_bytes or 0))
    have.others = [holder(r) for r in held.get("others") or []]
    on_gpu = {h.pid for h in have.holders}
    have.containers = [ContainerMemory(str(c["id"]), str(c.get("cgroup") or ""), int(c["bytes"]), list(c.get("pids") or []),
                                       bool(on_gpu & set(c.get("pids") or []))) for c in held.get("containers") or []]
    discrete = [str(g.get("name")) for g in facts.gpus or [] if g.get("name") and "GB10" not in str(g.get("name"))]
    if discrete:
        have.unified = False
        have.errors.append(f"the node's GPU ({discrete[0]}) has its own memory, which the node probe does not read: "
                           "the fit is unknown there")
    return have


def judge_fleet(launch: Launch, named: list[tuple[str, Facts]]) -> FleetFit:
    """Every node that answered judged on its own memory; the proposal that fits on all of them."""
    need, ranks, rules = per_node(launch, len(named))
    haves = {name: node_have(name, facts) for name, facts in named}
    for have in haves.values():
        if launch.container and have.limit_bytes is not None:  # as memory/findings.preflight: the runtime's cgroup binds it
            note = (f"the server runs in a container of image {launch.container}, in its runtime's cgroup: the memory "
                    f"limit of a node's shell cgroup ({gib(have.limit_bytes)} on {have.root[5:]}) does not bound it")
            need.notes.append(note)
            have.limit_bytes = have.limit_used_bytes = None
    fit = FleetFit(launch, need, ranks, rules, {name: judge(need, have) for name, have in haves.items()})
    verdicts = fit.verdicts.values()
    if not verdicts or any(v.outcome in (NO_FIT, UNKNOWN) for v in verdicts) or all(v.outcome == FITS for v in verdicts):
        return fit
    written = {k: need.setting(k) for k in KEYS if k in need.settings}
    for name, verdict in fit.verdicts.items():
        for key, value in (verdict.settings if verdict.outcome == FITS_WITH else written).items():
            if value is not None and (key not in fit.proposal or value < fit.proposal[key]):
                fit.proposal[key] = value
                if written.get(key) is None or value < written[key]:  # the node whose room lowered it
                    fit.decided_by[key] = name
    again = with_settings(need, fit.proposal)
    fit.proposal_fits = all(judge(again, haves[name]).outcome == FITS for name in fit.verdicts)
    return fit


def with_settings(need: Need, settings: dict[str, float]) -> Need:
    """`need` launched with `settings` (the fleet's proposal) instead of the recipe's."""
    changed = {k: Setting(v, "the fleet's proposal") for k, v in settings.items() if k != "kv_cache_memory_bytes"}
    kv = settings.get("kv_cache_memory_bytes")
    fixed = need.fixed_kv_bytes if kv is None else int(kv)
    return dataclasses.replace(need, settings={**need.settings, **changed}, fixed_kv_bytes=fixed)

