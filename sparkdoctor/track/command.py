"""What `sparkdoctor matrix track` does once its options are parsed: load, read, judge, write."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from sparkdoctor.cli_support import Fatal
from sparkdoctor.exitcodes import EXIT_OK, EXIT_VERIFY_CONTRADICTED, EXIT_VERIFY_ERROR


def run_track(through: dict[str, str], matrix_path: Path | None, fmt: str, output: Path | None, platform: str, python: str) -> int:
    from sparkdoctor.matrix import load
    from sparkdoctor.released import Reader
    from sparkdoctor.track.render import render_track, track_markdown
    from sparkdoctor.track.run import track
    from sparkdoctor.verify.command import _log

    matrix = load(matrix_path)  # a MatrixError (2) or RemoteError (2) says how the command ends
    if not matrix.tracking or not matrix.tracking.tracked:
        raise Fatal(f"{matrix.source}: the matrix has no [tracked] table (package = \"tracked-through version\"); nothing to track")
    from packaging.version import InvalidVersion, Version

    from sparkdoctor.released import PLATFORMS

    for package, version in through.items():
        try:
            Version(version)
        except InvalidVersion:
            raise Fatal(f"--through {package}={version}: {version!r} is not a version (e.g. vllm=0.33.0)") from None

    if platform not in PLATFORMS:
        raise Fatal(f"--platform {platform}: choose one of {', '.join(PLATFORMS)}")
    reader = Reader(platform, python)  # a RemoteError carries its exit code (2)
    started = time.monotonic()
    try:
        result = track(matrix, reader, through, _log())
    finally:
        reader.close()
    doc = result.to_dict()
    doc["cost"] = {"seconds": round(time.monotonic() - started, 1), "requests": reader.client.requests, "bytes_read": reader.client.bytes_read}
    if output is not None:
        _write(output, json.dumps(doc, indent=2) + "\n")
    needs = ("check-broken", "no-longer-affected", "upper-bound-moves", "lower-bound-moves")
    if any(p.get("error") for p in doc["packages"]):
        code = EXIT_VERIFY_ERROR
    else:
        code = EXIT_VERIFY_CONTRADICTED if any(e["verdict"] in needs for e in doc["entries"]) else EXIT_OK
    from sparkdoctor.emit import emit_console, emit_json, write_stdout

    if fmt == "json":
        return emit_json("matrix track", "track", doc, code)
    if fmt == "markdown":
        write_stdout(track_markdown(doc))
    else:
        emit_console(lambda console: render_track(doc, console))
    return code


def _write(path: Path, text: str) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a result file is as readable as any other
        os.replace(tmp, path)
    except OSError as exc:
        raise Fatal(f"{path}: cannot write: {exc.strerror or exc}") from None
