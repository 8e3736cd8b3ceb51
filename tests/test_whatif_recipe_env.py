"""whatif --recipe reads the new release's capabilities with the recipe's env set, as `recipe check` does. That env
is someone else's: what makes the interpreter run code (PYTHONHOME at a folder holding a planted `encodings`
package, which every interpreter imports first) reached the probe whole, and sparkdoctor's own interpreter ran the
planted code, unsandboxed. Now only variables that load no code reach it (targets.early.loads_code)."""

from __future__ import annotations

import sys
from pathlib import Path

from sparkdoctor.whatif.hypothetical import ScratchSite


def _planted_home(root: Path, canary: Path) -> Path:
    lib = root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "encodings"
    lib.mkdir(parents=True)
    # `open` is not there yet when encodings is imported; posix, built in, is
    (lib / "__init__.py").write_text(f"import posix\nposix.close(posix.open({str(canary)!r}, posix.O_WRONLY | posix.O_CREAT, 0o600))\n")
    return root


def test_a_recipes_code_loading_variables_never_reach_the_release_probe(tmp_path):
    canary = tmp_path / "CANARY"
    home = _planted_home(tmp_path / "home", canary)
    (tmp_path / "site").mkdir()
    site = ScratchSite.__new__(ScratchSite)  # the folder alone: what probe() runs over
    site.path = tmp_path / "site"
    try:
        answer = site.probe("capabilities", {"PYTHONHOME": str(home), "VLLM_USE_V1": "1"})
    finally:
        assert not canary.exists(), "a recipe's PYTHONHOME ran planted code in sparkdoctor's interpreter"
    assert isinstance(answer, dict)
