"""The views of `matrix track` (console, JSON, markdown: track/render.py draws them) and `matrix update`."""

from __future__ import annotations

from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.track.answer import TrackAnswer
from sparkdoctor.track.render import render_track, track_markdown
from sparkdoctor.track.update import Updated
from sparkdoctor.views import View


def _update_console(result: Result[Updated], sink: Sink) -> str:
    done = result.data.document
    return "".join([f"{done['message']}\n", *(f"  {line}\n" for line in done.get("diff", []))])


TRACK = View(TrackAnswer, {
    Format.console: lambda result, sink: sink.capture(
        lambda console: render_track(result.data.document, console, bool(result.options.get("verbose")))),
    Format.json: lambda result, sink: result.data.to_json(),
    Format.markdown: lambda result, sink: track_markdown(result.data.document)})
UPDATE = View(Updated, {Format.console: _update_console, Format.json: lambda result, sink: result.data.document})
