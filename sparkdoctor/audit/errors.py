"""The one error the audit raises: a checkpoint, config or option it cannot use, said in one line that names
the file (and the field or tensor) so the user knows exactly what to look at."""

from __future__ import annotations

from sparkdoctor.errors import InputError


class AuditError(InputError):
    """A bad checkpoint folder, header, config or option; the message is one line naming the file."""

    code = "audit"
