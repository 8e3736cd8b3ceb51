"""Conclusions: every "X is faster / X needs Y" tied to the toolchain it was measured on.

A conclusion is a named A/B result (ratio, CI, verdict) that points to the runs it came from, and so
to their Facts fingerprints. It goes stale when the current Facts of a target differ in anything the
fingerprint covers; `rerun` re-measures it on the current toolchain and says whether it holds, flipped
or changed. A recipe's workarounds are judged against the matrix the same way: one whose reason (a
`because` entry, or an entry that `justifies` it) no longer matches is stale, and rerun measures what
it costs.

Modules, each importing only those above it:
  model        Conclusion, Arm, ConclusionError
  store        conclusions in the ledger (table `conclusions`, ledger schema 3)
  toolchain    the current Facts of a target, once per python per invocation, and what changed
  workarounds  a recipe's workarounds, explicit and inferred from `justifies`, and their reasons judged
  staleness    fresh / stale (what changed) / broken (runs gone) / incomparable (recipe or bench changed)
  outcome      holds / flipped / changed, and regressions of one arm across toolchains
  rerun        the plan (dry run) and the re-measurement
  recipe_check static lint of a recipe against the matrix and the box
"""
