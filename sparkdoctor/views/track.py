"""The views of `matrix track` (console, JSON, markdown: track/render.py draws them) and `matrix update`."""

from __future__ import annotations

from sparkdoctor.result import Format, Result
from sparkdoctor.sink import Sink
from sparkdoctor.track.answer import TrackAnswer
from sparkdoctor.track.render import render_track, track_markdown
from sparkdoctor.track.update import Updated
from sparkdoctor.views import View


def _markdown(result: Result[TrackAnswer], sink: Sink) -> str:
    return track_markdown(result.data.document)


def _console(result: Result[TrackAnswer], sink: Sink) -> str:
    return sink.capture(lambda console: render_track(result.data.document, console, bool(result.options.get("verbose"))))


def _update_console(result: Result[Updated], sink: Sink) -> str:
    done = result.data.document
    return "".join([f"{done['message']}\n", *(f"  {line}\n" for line in done.get("diff", []))])


TRACK = View(TrackAnswer, {Format.console: _console, Format.json: lambda result, sink: result.data.to_json(),
                           Format.markdown: _markdown})
UPDATE = View(Updated, {Format.console: _update_console, Format.json: lambda result, sink: result.data.document})
