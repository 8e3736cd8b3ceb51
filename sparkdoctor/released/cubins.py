"""The cubin archs a shared object ships: the material of the `cubins` / `lacks_cubins` file checks
(what GPU code a released wheel really carries).

Read in Python from the fatbin entry headers of the library's `.nv_fatbin` section
(sparkdoctor.released.elf), so no CUDA tool is needed and every machine gives the same answer. As
`cuobjdump --list-elf` does (and the matrix's checks are written that way), a family cubin (sm_120f) is
named by its plain arch (sm_120), said in every result; an arch-specific cubin keeps its suffix (sm_120a).

A library is read as a stream from its first byte and only as far as the checks need: the listing
stops once every cubin check on that member is decided (a `cubins` check when all its archs were
seen, a `lacks_cubins` check when one of them was), else at the end of the fatbin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sparkdoctor.errors import SparkdoctorError
from sparkdoctor.exitcodes import EXIT_VERIFY_ERROR
from sparkdoctor.released.elf import ElfError, FatbinScanner, sort_archs

FAMILY_CAVEAT = "family cubins (sm_XXXf) are listed as plain sm_XXX"
Decided = Callable[[set[str]], bool]


class CubinError(SparkdoctorError, RuntimeError):
    """A library whose fatbin cannot be read; one line."""

    exit_code = EXIT_VERIFY_ERROR
    code = "verify-cubin"


@dataclass(frozen=True)
class Listing:
    """The cubin archs read from one library; `complete` unless the read stopped once the checks were decided."""

    archs: tuple[str, ...]
    complete: bool = True
    read: int = 0  # bytes of the library read
    size: int | None = None  # the library's size, where known

    def words(self) -> str:
        how = "" if self.complete else (" (read until the checks were decided: the first "
                                         f"{_mb(self.read)}{f' of {_mb(self.size)}' if self.size else ''})")
        return f"cubins {', '.join(self.archs) or 'none'}{how}"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def decided_by(checks: Iterable[tuple[str, tuple[str, ...]]]) -> Decided | None:
    """When the listing may stop: every (kind, archs) check decided; None when there are none."""
    wanted = list(checks)
    if not wanted:
        return None

    def decided(seen: set[str]) -> bool:
        return all((set(archs) <= seen) if kind == "cubins" else bool(set(archs) & seen) for kind, archs in wanted)

    return decided


def list_archs(chunks: Iterable[bytes], decided: Decided | None = None, name: str = "library") -> Listing:
    """The cubin archs of a library given as chunks from its first byte (empty without device code)."""
    scanner = FatbinScanner(decided)
    try:
        for chunk in chunks:
            scanner.feed(chunk)
            if scanner.done:
                break
        scanner.finish()
    except ElfError as exc:
        raise CubinError(f"{name}: {exc}") from None
    return Listing(sort_archs(scanner.archs), scanner.complete, scanner.read)


def zip_chunks(zip_file, name: str, size: int = 1 << 20) -> Iterable[bytes]:
    """One member of an open zip, chunk by chunk (nothing held whole)."""
    with zip_file.open(name) as src:
        while chunk := src.read(size):
            yield chunk
