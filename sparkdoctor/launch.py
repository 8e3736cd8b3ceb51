"""Console entry point. Starts the target probe before the CLI framework is imported: the probe is
the long pole of a warm `check`, and typer + rich + the rest of sparkdoctor load while it runs."""

from __future__ import annotations


def main() -> None:
    from sparkdoctor import target_probe

    try:
        target_probe.early_start()
    except Exception:  # never let the head start break the CLI: it simply starts the probe itself
        target_probe.EARLY.clear()
    from sparkdoctor.cli import main as cli_main

    cli_main()
