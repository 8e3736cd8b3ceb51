"""Plain progress (a pipe, CI, a log file) names a slow stage even when nothing else is said while it runs.

Plain lines start once a command has run SPARKDOCTOR_PROGRESS_AFTER_S seconds (15 by default), so a quick answer stays
alone. A stage announced before that and still running after it was never named: `whatif` resolving with the target's
pip printed nothing for 2 min 40 s into a CI log, then `[02:42] reading the new releases' files`."""

from __future__ import annotations

import time

from sparkdoctor import progress as progress_module


def _wait_for(capsys, text: str, polls: int = 400) -> str:
    seen = ""
    for _ in range(polls):  # a guard against a hang, not a speed bound: the line is due after 0.1 s
        seen += capsys.readouterr().err
        if text in seen:
            return seen
        time.sleep(0.05)
    return seen


def test_a_stage_announced_early_is_named_once_the_command_has_run_long(monkeypatch, capsys):
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0.1")
    with progress_module.progress_line(command="whatif") as say:
        say("resolving the upgrade ...")  # at once: held back, the command may end quickly
        err = _wait_for(capsys, "resolving the upgrade")  # the stage still runs past 0.1 s: it is named
    assert "resolving the upgrade ..." in err
    assert err.count("\n") == 1 and err.startswith("sparkdoctor: [00:00] ")


def test_a_quick_command_stays_silent_and_nothing_is_written_after_it_ended(monkeypatch, capsys):
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0.2")
    with progress_module.progress_line(command="whatif") as say:
        say("resolving the upgrade ...")
    time.sleep(0.6)
    assert capsys.readouterr().err == ""


def test_a_stage_said_again_after_it_was_named_is_not_repeated_at_once(monkeypatch, capsys):
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0.1")
    with progress_module.progress_line() as say:
        say("starting srv (1s): loading")
        err = _wait_for(capsys, "starting srv")
        say("starting srv (2s): loading")  # the same stage ticking: at most every PLAIN_REPEAT_S
        err += capsys.readouterr().err
    assert err.count("starting srv") == 1


def test_a_time_limit_no_timer_can_hold_is_quiet_and_never_an_error(monkeypatch, capsys):
    for setting in ("1e400", "nan", "-5", "off"):
        monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", setting)
        with progress_module.progress_line() as say:
            say("resolving ...")
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception" not in err


def test_a_stage_that_runs_for_minutes_is_said_again_so_the_log_shows_it_alive(monkeypatch, capsys):
    # `whatif vllm==0.33.0` on a torch venv: pip resolved for 9 minutes; the CI log held one line, "[00:15] resolving
    # the upgrade (a dry run of the target's installer)", and nothing after it, as a hung run's log does
    monkeypatch.setenv("SPARKDOCTOR_PROGRESS_AFTER_S", "0.1")
    monkeypatch.setattr(progress_module, "PLAIN_STILL_S", 0.2)
    with progress_module.progress_line(command="whatif") as say:
        say("resolving the upgrade (a dry run of the target's installer)")
        err = ""
        for _ in range(12_000):  # a guard against a hang (10 minutes of 50 ms naps), not a speed bound
            err += capsys.readouterr().err
            if err.count("resolving the upgrade") >= 3:
                break
            time.sleep(0.05)
    lines = err.splitlines()
    assert len(lines) >= 3 and all(line.endswith("] resolving the upgrade (a dry run of the target's installer)")
                                   for line in lines), lines
    time.sleep(0.5)
    assert capsys.readouterr().err == ""  # nothing after the command ended
