"""`sparkdoctor fix`: turn check's findings into a reviewed plan, apply it with a journal, prove it
worked by checking again, and roll it back byte for byte.

The pipeline, one module each, imports running one way (definitions -> plan -> journal -> apply):
- definitions: the fix files (fixes/*.toml), a FIXED vocabulary of actions, validated;
- inventory: what the target has (every dist, its files, where it came from), read by a
  standard-library script run by the target's own interpreter;
- installers: pip or uv, whichever the target uses, always with a dry-run resolution first;
- edits: the text edits (a pin, an env line, a recipe flag) as pure functions of file bytes;
- plan: findings -> actions -> a Plan, with the refusals a person would not want done silently;
- siblings: the family members a constraints file pins with a package (they move together);
- journal (+ journal_schema): everything needed to undo, written and marked complete before the first
  change, validated whole before anything is done from it; unsettled: the one small file per target
  that says an apply or rollback is under way (what check reads);
- actions: the steps as Action objects (verify all, execute, reverse the executed last first);
- restore: what a rollback puts back, proved possible before anything is destroyed (wheels, else the
  journal's byte copies); outside: the files of every dist the plan does not name, checked and put back;
- apply: apply, re-check, rollback, each step a numbered boundary (fault injection kills there);
  pdeath: the installer's children die with fix.

Everything that touches the target goes through the Target protocol: scripts through run_script,
files through its file transport (sparkdoctor/target_files.py), so `fix --container NAME` is the
same pipeline with a ContainerTarget. The journal always stays on this machine and records which
target it is of; the env file and the recipe named on the command line are this machine's files.
"""
