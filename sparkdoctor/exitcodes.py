"""Exit codes (documented in the README; CI depends on them). A module of its own so the CLI can use
them without importing the report machinery before it has started the target probe."""

EXIT_OK = 0  # nothing at or above --fail-on; `matrix verify`: every entry confirmed
EXIT_FINDINGS = 1  # findings at or above --fail-on
EXIT_USAGE = 2  # usage or internal error
EXIT_UNPROBEABLE = 3  # the target could not be probed at all

# `sparkdoctor matrix verify`
EXIT_VERIFY_CONTRADICTED = 1  # an entry is contradicted by the installs it names
EXIT_VERIFY_ERROR = 2  # an environment could not be built or probed (and none contradicted)

# `sparkdoctor diff A B`
EXIT_DIFF_SAFE = 0  # no risky difference (there may be benign ones)
EXIT_DIFF_RISKY = 1  # a difference that breaks a multi-node run (vLLM, torch, NCCL, driver, image, ...)
EXIT_DIFF_BAD_INPUT = 2  # a file that is not a Facts snapshot (one line naming the file and field)

# `sparkdoctor audit` (bad input — a corrupt header, a config without the fields — is EXIT_USAGE)
EXIT_AUDIT_FINDINGS = 1  # weights + KV cache do not fit, or the quantization config disagrees with the tensors

# `sparkdoctor explain`
EXIT_EXPLAIN_NO_MATCH = 1  # no matrix entry's symptom appears in the text (0: at least one did)

# `sparkdoctor fix` (after --yes, or a dry run: check's table above for the target as it is then)
EXIT_FIX_REFUSED = 4  # the plan has a refusal (system interpreter, vendor build, user pin, a read-only file system,
#                       ...) and --yes was given; or --rollback of a journal of another target (another container,
#                       a container now running another image, a local venv named for a container's journal)
EXIT_FIX_FAILED = 5  # the apply failed and was rolled back (or a rollback found differences); also a container
#                      that stopped or went away half-way, or one whose environment has no pip
EXIT_FIX_UNCHANGED = 6  # fix stopped before it changed anything: the plan could not be made or resolved (the line
#                        names the conflicting requirements), the index could not be reached, the journal could not
#                        be written (a full disk), another fix holds the target's lock, a local target has no pip
#                        and no uv is on PATH
# Also EXIT_FIX_REFUSED (4): a new fix on a target whose last apply or rollback did not finish (the line names the
# `fix --rollback ID` that settles it); a rollback from a journal that is not trusted (damaged, lost its COMPLETE
# marker after its apply started) or whose saved wheels and file copies cannot restore the target: nothing changed.
# EXIT_USAGE (2): `fix --rollback ID` of a journal that does not exist; a malformed fix file; bad options.
# `fix --container`: a container that does not exist, is stopped or has no Python is EXIT_UNPROBEABLE (3), as for check

# `sparkdoctor bench` and `sparkdoctor history`
EXIT_BENCH_WRONG = 1  # the run's answers were judged wrong, or an A/B level's faster arm was (`--allow-wrong`: 0)
EXIT_BENCH_UNCHECKED = 3  # a reference to judge by (--reference-file, stored for the model, or being marked) and the
#                           answers (a run's, or an arm's) not judged against it: `unchecked` or `unscored` (measured
#                           and stored; `--allow-wrong`: 0); a model with no reference yet is 0, said on stderr
EXIT_BENCH_FAILED = 4  # the server could not be launched, reached or measured to the end (nothing stored)
EXIT_LEDGER = 5  # the ledger file cannot be opened, read or written (corrupt, newer schema, not ours)

# `sparkdoctor rerun` (and `conclusions`): bench's 4 and 5 keep their meaning
EXIT_RERUN_FAIL_ON = 1  # --fail-on flipped|regression: a conclusion flipped, or a recipe got measurably slower
EXIT_RERUN_INCOMPLETE = 4  # a stale conclusion or workaround could not be re-measured (it stays stale; says why)

# `sparkdoctor recipe check` (findings and --fail-on as `check`: 0, 1; bad recipe 2; unprobeable target 3)
EXIT_NO_VLLM = 6  # no --python, the recipe's command names no environment, and the default one has no vLLM:
#                   nothing to judge against, so no verdict (never a silent pass)
