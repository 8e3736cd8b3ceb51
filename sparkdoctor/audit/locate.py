"""Which folder a MODEL argument names: a local checkpoint folder, or a model already in the Hugging Face cache.

The cache layout is huggingface_hub's (https://huggingface.co/docs/huggingface_hub/guides/manage-cache):
`$HF_HUB_CACHE` (default `$HF_HOME/hub`, default `~/.cache/huggingface/hub`) holds
`models--{org}--{name}/refs/{revision}` (a file holding a commit id) and
`models--{org}--{name}/snapshots/{commit}/` (the files, usually symlinks into `blobs/`). Accepted: a path;
`org/name` (its `refs/main`); `org/name@revision` (a ref name or a commit id); a bare snapshot commit id
found under any cached model. The network is never asked: a model that is not on disk is an error.

A revision is a commit id (40 hex digits) or a git ref name as `git check-ref-format` allows it (`main`,
`v1.0`, `refs/pr/1`: slashes separate components; no `..`, no component starting with `.`, no leading or
trailing `/`, none of `\\ ~^:?*[`, spaces or control characters), so `refs/{revision}` stays inside the
model's folder; a ref file is read bounded, only when it is a regular file, and must hold a commit id.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparkdoctor.audit.errors import AuditError
from sparkdoctor.inputs import read_text

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_COMMIT = re.compile(r"[0-9a-f]{40}")  # always fullmatch: `$` would let a trailing newline through
_REF_BAD = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|^\.|/\.|\.lock$|\.lock/|^@$")
MAX_REF = 4096  # a ref file holds one commit id (41 bytes); git refuses longer ref names too


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    return Path(home) / "hub"


def resolve_model(ref: str) -> Path:
    """The checkpoint folder `ref` names; AuditError (one line) when it names none."""
    if not ref:
        raise AuditError("MODEL is empty: name a checkpoint folder, an org/name in the Hugging Face cache, or a snapshot id")
    shown = ref if ref.isprintable() and len(ref) <= 300 else f"{ref[:200]!r}"  # a message stays one short line
    try:  # `~nosuchuser/x` (no home to expand) and a name past NAME_MAX were an internal error here
        path = Path(ref).expanduser()
        if path.is_dir():
            return path
        if path.exists():
            raise AuditError(f"{shown}: is a file; name the checkpoint's folder (the one holding config.json)")
    except (OSError, RuntimeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).rstrip(".")
        raise AuditError(f"{shown}: not a folder sparkdoctor can read ({why})") from None
    repo, _, revision = ref.partition("@")
    cache = hub_cache()
    if _REPO_ID.fullmatch(repo):
        return _snapshot(cache, repo, revision or "main", shown)
    if _COMMIT.fullmatch(ref):
        found = sorted(cache.glob(f"models--*/snapshots/{ref}")) if cache.is_dir() else []
        if found:
            return found[0]
        raise AuditError(f"{shown}: no such folder, and no snapshot with that id in the Hugging Face cache {cache}")
    raise AuditError(f"{shown}: no such folder (and not an org/name or a snapshot id of the Hugging Face cache)")


def _snapshot(cache: Path, repo: str, revision: str, ref: str) -> Path:
    model = cache / ("models--" + repo.replace("/", "--"))
    if not model.is_dir():
        raise AuditError(f"{ref}: neither a folder nor a model in the Hugging Face cache {cache} (audit never downloads; fetch it first)")
    commit = revision if _COMMIT.fullmatch(revision) else _read_ref(model, revision, ref)
    folder = model / "snapshots" / commit
    if not folder.is_dir():
        raise AuditError(f"{ref}: the cache has no snapshot {commit} of {repo} ({folder})")
    return folder


def _read_ref(model: Path, revision: str, ref: str) -> str:
    """The commit id `refs/{revision}` holds; AuditError for a revision that is no ref name, a ref that
    leaves the model's folder, is not a regular file, or holds anything but a commit id."""
    if len(revision) > 255 or _REF_BAD.search(revision):
        raise AuditError(f"{ref}: revision {revision[:100]!r} is neither a commit id (40 hex digits) nor a ref name "
                         "(such as main, v1.0 or refs/pr/1)")
    refs = model / "refs"
    ref_file = refs / revision
    try:
        if not ref_file.resolve().is_relative_to(refs.resolve()):
            raise AuditError(f"{ref}: the cache's ref {revision!r} leads outside {refs}")
        text = read_text(ref_file, MAX_REF)  # a regular file only: a FIFO or device is refused, never waited on
    except FileNotFoundError:
        raise AuditError(f"{ref}: the cache has {model.name} but no ref {revision!r} ({ref_file})") from None
    except (OSError, RuntimeError, UnicodeDecodeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        why = getattr(exc, "strerror", None) or str(exc)
        raise AuditError(f"{ref}: cannot read the cache's ref {ref_file}: {why}") from None
    commit = text.strip()
    if not _COMMIT.fullmatch(commit):
        raise AuditError(f"{ref}: the cache's ref {ref_file} does not hold a commit id (40 hex digits)")
    return commit
