"""`sparkdoctor matrix track`: the releases of the tracked packages newer than the matrix's
"tracked through" version, every entry's file checks re-run on them (released files read member by
member, sparkdoctor.released), and per entry a verdict and the edit it needs. It proposes edits and
never applies them: the matrix is changed by a person, through review.

  run       which releases, which entries, the verdicts and the proposed edits
  render    console and markdown views of the JSON-able result
"""
