"""The mods gate: does each patch a recipe applies still apply, is it already upstream, or will it break the
launch? Interface: `judge.judge_mod(path, tree)` with a tree from `sparkdoctor.mods.trees` (an installed
environment or released wheels); the verdicts are `sparkdoctor.mods.model.Verdict`. Nothing here changes a
target: diffs are dry runs on scratch copies, scripts run isolated against a scratch copy.
"""
