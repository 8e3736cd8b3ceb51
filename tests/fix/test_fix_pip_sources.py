"""Package sources beside the index in the user's pip settings (an extra index, a remote page of links), during `fix`
and `fix --yes`, on a venv made as users make them (python -m venv, its pip, plain pip install), a local empty index,
local file indexes and a page of links served on 127.0.0.1, no network.

Before: a package only an extra index had (set aside by fix's pip) failed the plan's dry run with exit 6 and one line
that said neither that the index was set aside nor how to install from it; a remote `find-links` page was kept: it
served the plan's packages beside the index, and the plan did not name it. Now only the user's own files (a folder,
file://) are kept beside an index, a remote page is set aside and named as an extra index is, it stays the source
when no-index makes it the only one, and the one line of a package not found names the sources set aside."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fix import scenario
from tests.fix.scenario import fix_cli
from tests.fix.test_fix_pip_settings import FIX, MATRIX, _indexes

pytestmark = pytest.mark.slow


@contextmanager
def links_page(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """folder's listing (a page of links to its wheels) served on 127.0.0.1; its URL and the paths asked for."""
    asked: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", asked
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=30)


def test_sources_beside_the_index_are_set_aside_named_and_said_when_a_package_is_only_there(tmp_path, wheels, monkeypatch):
    python = scenario.make_target(tmp_path, "pip", wheels)
    site = next(python.parent.parent.glob("lib/python*/site-packages"))
    index, second = _indexes(tmp_path / "indexes")
    data = tmp_path / "data"
    (data / "matrix").mkdir(parents=True)
    (data / "fixes").mkdir()
    (data / "matrix" / "small.toml").write_text(MATRIX)
    (data / "fixes" / "six-and-decorator.toml").write_text(FIX)
    for name in ("PIP_CONFIG_FILE", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CONFIG_DIRS": str(tmp_path / "no-xdg"), "PIP_INDEX_URL": index, "COLUMNS": "80"}
    before = sorted(p.name for p in site.glob("*.dist-info"))

    # the plan's packages only on the extra index of the user's pip.conf: the one line says it was set aside, and how
    conf.write_text(f"[global]\nextra-index-url = {second}\n")
    failed = fix_cli(python, "--yes", env=env, data=data)
    assert failed.returncode == 6, failed.stdout + failed.stderr
    (line,) = [ln for ln in failed.stderr.splitlines() if ln.startswith("sparkdoctor: error:")]
    assert "nothing was changed" in line and f"[global] extra-index-url = {second} (a pip config file)" in line, line
    assert "make it the index-url (PIP_INDEX_URL)" in line, line
    assert sorted(p.name for p in site.glob("*.dist-info")) == before

    with links_page(wheels) as (url, asked):
        # beside the index, a remote page of links is set aside (never read) and named; the user's folder is kept
        conf.write_text(f"[global]\nfind-links = {wheels} {url}\n")
        planned = fix_cli(python, "--format", "json", env=env, data=data)
        assert planned.returncode == 1, planned.stdout + planned.stderr
        plan = scenario.as_json(planned)["plan"]
        assert plan["changes"]["six"] == ["1.16.0", "1.17.0"], plan
        (note,) = [n for n in plan["notes"] if n.startswith("fix's pip runs without these pip settings")]
        assert f"[global] find-links = {url} (a pip config file): a remote page of links beside the index" in note, note
        assert str(wheels) not in note and not asked, (note, asked)

        # with no-index the page is the only source, the user's index: kept, read, not named
        only = fix_cli(python, "--format", "json", env={**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": url}, data=data)
        assert only.returncode == 1, only.stdout + only.stderr
        plan = scenario.as_json(only)["plan"]
        assert plan["changes"]["decorator"] == [None, "5.1.1"] and asked, (plan, asked)
        assert not [n for n in plan["notes"] if "find-links" in n or "PIP_FIND_LINKS" in n], plan["notes"]
