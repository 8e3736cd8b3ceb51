"""What-if: a proposed upgrade judged before it is installed (`sparkdoctor whatif SPEC ...`).

  resolve       the target's own pip, in a dry run with the target's constraint files: the exact
                distributions that would change (or one line saying which requirements conflict)
  hypothetical  today's Facts moved to the predicted versions; the cutlass-dsl build that would be
                active; vLLM's / FlashInfer's capabilities read from the new releases' own files
                (single members of the released wheels, sparkdoctor.released), never installed
  judge         both Facts judged by the matrix; findings fixed / introduced / unchanged / cannot tell
"""
