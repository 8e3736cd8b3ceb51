"""Which folder a MODEL argument names: a local checkpoint folder, or a model already in the Hugging Face cache.

The cache layout is huggingface_hub's (https://huggingface.co/docs/huggingface_hub/guides/manage-cache):
`$HF_HUB_CACHE` (default `$HF_HOME/hub`, default `~/.cache/huggingface/hub`) holds
`models--{org}--{name}/refs/{revision}` (a file holding a commit id) and
`models--{org}--{name}/snapshots/{commit}/` (the files, usually symlinks into `blobs/`). Accepted: a path;
`org/name` (its `refs/main`); `org/name@revision` (a ref name or a commit id); a bare snapshot commit id
found under any cached model. The network is never asked: a model that is not on disk is an error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparkdoctor.audit.errors import AuditError

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(home) / "hub"


def resolve_model(ref: str) -> Path:
    """The checkpoint folder `ref` names; AuditError (one line) when it names none."""
    if not ref:
        raise AuditError("MODEL is empty: name a checkpoint folder, an org/name in the Hugging Face cache, or a snapshot id")
    path = Path(ref).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise AuditError(f"{ref}: is a file; name the checkpoint's folder (the one holding config.json)")
    repo, _, revision = ref.partition("@")
    cache = hub_cache()
    if _REPO_ID.match(repo):
        return _snapshot(cache, repo, revision or "main", ref)
    if _COMMIT.match(ref):
        found = sorted(cache.glob(f"models--*/snapshots/{ref}")) if cache.is_dir() else []
        if found:
            return found[0]
        raise AuditError(f"{ref}: no such folder, and no snapshot with that id in the Hugging Face cache {cache}")
    raise AuditError(f"{ref}: no such folder (and not an org/name or a snapshot id of the Hugging Face cache)")


def _snapshot(cache: Path, repo: str, revision: str, ref: str) -> Path:
    model = cache / ("models--" + repo.replace("/", "--"))
    if not model.is_dir():
        raise AuditError(f"{ref}: neither a folder nor a model in the Hugging Face cache {cache} (audit never downloads; fetch it first)")
    commit = revision
    if not _COMMIT.match(revision):
        ref_file = model / "refs" / revision
        try:
            commit = ref_file.read_text(encoding="utf-8").strip()
        except OSError:
            raise AuditError(f"{ref}: the cache has {model.name} but no ref {revision!r} ({ref_file})") from None
    folder = model / "snapshots" / commit
    if not folder.is_dir():
        raise AuditError(f"{ref}: the cache has no snapshot {commit} of {repo} ({folder})")
    return folder
