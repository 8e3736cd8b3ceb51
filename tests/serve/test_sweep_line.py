"""The line that says what the sweep stopped is one line, whatever the record it read held.

The program's name comes from the launch record in the state folder (a recipe command's first word): an escape
sequence or a line break in it reached the terminal raw."""

from __future__ import annotations

import importlib

from sparkdoctor.serve.logpump import LogPump

launch_module = importlib.import_module("sparkdoctor.serve.launch")  # the package's `launch` is the function


def test_the_sweep_line_escapes_what_the_record_held(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(launch_module.registry, "sweep", lambda: ["process group 7 (\x1bcvllm\nfake, 1 process(es)): SIGTERM"])
    pump = LogPump(tmp_path / "server.log", [])
    launch_module._sweep(pump)
    pump.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\\x1bcvllm\\nfake" in err
