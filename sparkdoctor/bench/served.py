"""What a server sparkdoctor did not launch (`bench --url`) says about its own configuration, and what it does not.

A launched server's configuration is its recipe (the argv, env and model, in the run's recipe fingerprint); a server
at `--url` has none, so two runs against the same URL restarted with other flags compared as one configuration. What
can be known is asked of the server itself, after the timed window:
- `/v1/models`: the measured model's entry (vLLM: `root`, the path or hub id it loaded, and `max_model_len`);
- `/version`: the vLLM version (bench/server.py already asked);
- `/server_info`: vLLM's engine configuration as it prints it at start (`model=..., revision=..., dtype=...,
  max_seq_len=..., tensor_parallel_size=..., quantization=..., enforce_eager=..., kv_cache_dtype=...,
  compilation_config=...`), served only when the server runs with `VLLM_SERVER_DEV_MODE=1`;
- `/metrics`: `vllm:cache_config_info`, the KV cache's settings (block size, cache dtype, memory utilization,
  prefix caching), less the figures measured at start (block counts, sizes: they follow the free memory);
- the model's revision: `revision=` of /server_info, else the commit of a served Hugging Face cache snapshot folder,
  else, for a hub id, the local Hugging Face cache's `refs/main` (what an offline server loads; a server started
  with another `--revision` is told apart only by /server_info).
Its fingerprint joins the ledger's recipe hash (ledger/store.py) and the cell's config hash (bench/cell.py);
what could not be known is named in `unknown`, in words. Every answer is read as someone else's: bounded, its
shapes checked, a string cut at MAX_TEXT characters.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import TypedDict

from sparkdoctor.bench.http import HttpError, get, run
from sparkdoctor.bench.prometheus import parse
from sparkdoctor.inputs import NotJSON, NumberTooLong, json_answer

MAX_TEXT = 16_384  # one string kept from a server's answer (vLLM's engine configuration line is about 2 KB)
TIMEOUT = 5.0
INFO_TIMEOUT = 30.0  # /server_info first collects the server's environment (vLLM's collect_env: `pip list`, ...)
CACHE_INFO = "vllm:cache_config_info"
MEASURED_AT_START = frozenset({"engine", "num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens",
                               "kv_cache_max_concurrency"})  # follow the memory free at start, not a flag
_REVISION = re.compile(r"(?:^|, )revision=([^,]*),")
_SNAPSHOT = re.compile(r"/models--[^/]+/snapshots/([0-9a-f]{40})(?:/|$)")
_DTYPE = re.compile(r"(?:^|, )dtype=torch\.(\w+)(?:,|$)")  # the model's, as VllmConfig prints it (not kv_cache_dtype=)
AUTO = "sized at vLLM's default, auto: the checkpoint's own dtype (a float32 one in bfloat16)"


class Revision(TypedDict):
    commit: str | None  # a commit id, or a ref name the server was given (None: not known)
    source: str | None  # where it was read, in words


class Served(TypedDict):
    """The `served` block of a --url run's recipe."""

    model: dict[str, str | int] | None  # the /v1/models entry of the measured model: root, parent, max_model_len
    version: str | None  # /version (vLLM)
    engine_config: str | None  # /server_info's vllm_config, as vLLM prints it at start
    cache_config: dict[str, str] | None  # vllm:cache_config_info's labels, less MEASURED_AT_START
    revision: Revision
    fingerprint: str  # over all of the above but `unknown`: in the ledger's recipe hash and the cell's config hash
    unknown: list[str]  # what could not be known, in words


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


async def _get(url: str, path: str, timeout: float = TIMEOUT) -> tuple[int, bytes] | None:
    try:
        return await get(url, path, timeout)
    except HttpError:
        return None


def _json(reply: tuple[int, bytes] | None) -> object:
    """The JSON of a 200 answer; None for none, the NotJSON (said where it is a number too long) for one no JSON."""
    if reply is None or reply[0] != 200:
        return None
    try:
        return json_answer(reply[1].decode("utf-8", "replace"))
    except NotJSON as exc:
        return exc


def _model_entry(doc: object, model: str) -> dict[str, str | int] | None:
    data = doc.get("data") if isinstance(doc, dict) else None
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model:
            out: dict[str, str | int] = {  # its id is the model measured (the run's `model`)
                k: text for k in ("root", "parent") if (text := _text(entry.get(k))) is not None}
            length = entry.get("max_model_len")
            if isinstance(length, int) and not isinstance(length, bool):
                out["max_model_len"] = length
            return out
    return None


def _cache_config(answer: tuple[int, bytes] | None) -> dict[str, str] | None:
    if answer is None or answer[0] != 200:
        return None
    series = parse(answer[1].decode("utf-8", "replace")).get(CACHE_INFO)
    if not series:
        return None
    labels = sorted(series)[0]  # one engine's; a data-parallel server repeats it per engine
    return {k: v[:MAX_TEXT] for k, v in labels if k not in MEASURED_AT_START}


def _revision(engine_config: str | None, root: str | None) -> Revision:
    """The served model's revision and where it was read (see the module's docstring)."""
    from sparkdoctor.audit.errors import AuditError
    from sparkdoctor.audit.locate import hub_cache, resolve_model

    said = _REVISION.search(engine_config or "")
    given = said.group(1).strip().strip("'\"") if said else None
    if given and given != "None":
        return {"commit": given[:200], "source": "the server's /server_info (revision=)"}
    if root and (snap := _SNAPSHOT.search(root)):
        return {"commit": snap.group(1), "source": "the served folder, a Hugging Face cache snapshot"}
    if root and not root.startswith(("/", ".", "~")) and root.count("/") == 1:  # a hub id the server loaded
        try:
            folder = resolve_model(root)
        except AuditError:
            return {"commit": None, "source": None}
        return {"commit": folder.name, "source": f"the local Hugging Face cache's refs/main ({hub_cache()}): what an "
                                                 "offline server loads; one started with --revision may serve another"}
    return {"commit": None, "source": None}


def roofline_flags(served: Served) -> tuple[list[str], str | None]:
    """The flags a --url run's roofline is sized at, as the server says them (the KV cache dtype of /metrics, the
    model's dtype of /server_info, read by the audit's --dtype reader), and why its --dtype is assumed (None: said)."""
    from sparkdoctor.audit.fromrecipe import vllm_dtype

    flags = [] if not (cache := (served["cache_config"] or {}).get("cache_dtype")) else ["--kv-cache-dtype", cache]
    said = _DTYPE.search(served["engine_config"] or "")
    if said is None:
        return flags, f"the server does not say it (vLLM does at /server_info when started with VLLM_SERVER_DEV_MODE=1): {AUTO}"
    try:
        return [*flags, "--dtype", vllm_dtype(said.group(1))], None
    except ValueError:  # a torch dtype that no --dtype names
        return flags, f"the server's /server_info says dtype=torch.{said.group(1)}, which no --dtype names: {AUTO}"


def fingerprint(served: Served) -> str:
    """Over what the server said: not where the revision was read, nor what is unknown, nor the URL (a cell's config
    hash leaves the port out: the same server elsewhere is the same configuration)."""
    material = {"revision": served["revision"]["commit"],
                **{k: v for k, v in served.items() if k not in ("fingerprint", "unknown", "revision")}}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read(url: str, model: str, version: str | None, vllm: bool) -> Served:
    """What the server at `url` says of its configuration for `model` (never raises: what it does not say is named
    in `unknown`)."""

    Answer = tuple[int, bytes] | None

    async def go() -> tuple[object, Answer, Answer]:
        models, info, metrics = await asyncio.gather(_get(url, "/v1/models"), _get(url, "/server_info", INFO_TIMEOUT),
                                                     _get(url, "/metrics"))
        return _json(models), info, metrics

    models, info, metrics = run(go())
    entry = _model_entry(models, model)
    said = _json(info)
    engine = _text(said.get("vllm_config")) if isinstance(said, dict) else None
    cache = _cache_config(metrics)
    root = entry.get("root") if entry else None
    revision = _revision(engine, root if isinstance(root, str) else None)
    unknown = []
    if entry is None:
        unknown.append(f"the model's entry: /v1/models {f'answer {models}' if isinstance(models, NumberTooLong) else f'does not list {model!r}'}")
    if engine is None and not vllm:
        unknown.append("the server's flags: it is not vLLM, which says them")
    elif engine is None:
        how = (f"/server_info's answer {said}" if isinstance(said, NumberTooLong)
               else "it does not serve them (vLLM does at /server_info when started with VLLM_SERVER_DEV_MODE=1)"
               if info is not None and info[0] == 404 else f"/server_info answered HTTP {info[0]}, not them"
               if info is not None else f"/server_info did not answer within {INFO_TIMEOUT:.0f} s")
        unknown.append(f"the server's engine arguments: {how}")
    if cache is None and vllm:
        unknown.append(f"the KV cache settings: /metrics has no {CACHE_INFO}")
    if revision["commit"] is None:
        where = f"{root!r} is " if isinstance(root, str) else "the model is "
        unknown.append(f"the model's revision: {where}neither a hub id in the local Hugging Face cache nor a cache "
                       "snapshot, and the server does not say it" + (" (--model-dir DIR keys the run to a local "
                                                                      "folder's files)" if isinstance(root, str) and
                                                                     root.startswith("/") else ""))
    served: Served = {"model": entry, "version": version, "engine_config": engine, "cache_config": cache,
                      "revision": revision, "fingerprint": "", "unknown": unknown}
    served["fingerprint"] = fingerprint(served)
    return served
