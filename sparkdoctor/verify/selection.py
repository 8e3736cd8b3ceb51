"""Which entries `matrix verify` proves, and with what: an entry's probe, the result it expects on an
affected install, and the environments of its `verify` table (parsed by sparkdoctor.matrix, which
has already refused any table that does not parse)."""

from __future__ import annotations

from dataclasses import dataclass

from sparkdoctor.errors import UsageError
from sparkdoctor.matrix import Entry, Matrix, MatrixError
from sparkdoctor.matrix.verify_table import Env, parse_verify_table


class VerifyError(UsageError, ValueError):
    """An entry that cannot be verified (no verify table, no such id); the message names it."""

    code = "verify-selection"


@dataclass
class Spec:
    entry: Entry
    probe: str
    expect: str
    affected: list[Env]
    fixed: list[Env]


def parse_spec(entry: Entry) -> Spec:
    label = f"{entry.file}: entry {entry.id}"
    vb = entry.verified_by or {}
    if not entry.verify:
        raise VerifyError(f"{label}: field 'verify' is missing (nothing says which installs to try)")
    if not vb.get("probe") or not vb.get("expect"):
        raise VerifyError(f"{label}: field 'verified_by' needs probe and expect for verify")
    try:
        table = parse_verify_table(entry.verify, label)
    except MatrixError as exc:  # an Entry made by hand, not by the loader
        raise VerifyError(str(exc)) from None
    return Spec(entry, vb["probe"], vb["expect"], table.affected, table.fixed)


def select(matrix: Matrix, entry_id: str | None) -> list[Spec]:
    if entry_id is not None:
        entry = matrix.get(entry_id)
        if entry is None:
            raise VerifyError(f"no matrix entry with id {entry_id!r}")
        return [parse_spec(entry)]
    return [parse_spec(e) for e in matrix.entries if e.verify and e.verified_by and not e.withdrawn]
