"""Exit codes (documented in the README; CI depends on them). A module of its own so the CLI can use
them without importing the report machinery before it has started the target probe."""

EXIT_OK = 0  # nothing at or above --fail-on; `matrix verify`: every entry confirmed
EXIT_FINDINGS = 1  # findings at or above --fail-on
EXIT_USAGE = 2  # usage or internal error
EXIT_UNPROBEABLE = 3  # the target could not be probed at all

# `sparkdoctor matrix verify`
EXIT_VERIFY_CONTRADICTED = 1  # an entry is contradicted by the installs it names
EXIT_VERIFY_ERROR = 2  # an environment could not be built or probed (and none contradicted)

# `sparkdoctor bench` and `sparkdoctor history`
EXIT_BENCH_FAILED = 4  # the server could not be launched, reached or measured to the end (nothing stored)
EXIT_LEDGER = 5  # the ledger file cannot be opened, read or written (corrupt, newer schema, not ours)

# `sparkdoctor rerun` (and `conclusions`): bench's 4 and 5 keep their meaning
EXIT_RERUN_FAIL_ON = 1  # --fail-on flipped|regression: a conclusion flipped, or a recipe got measurably slower
EXIT_RERUN_INCOMPLETE = 4  # a stale conclusion or workaround could not be re-measured (it stays stale; says why)
