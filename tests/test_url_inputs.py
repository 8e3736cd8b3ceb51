"""A URL where a local file is read (a recipe, snapshot, log, mod or cell from a web page): one line naming it,
exit 2. `Path` made `https://host/x` into `https:/host/x` and said "no such file" (exit 2), so the
line named neither what was given nor why it cannot be read; nothing is fetched (no network needed)."""

from __future__ import annotations

import pytest

from tests.inproc import invoke

URL = "https://example.com/x.toml"


@pytest.mark.parametrize("args, label", [
    (("recipe", "check", URL), ""),
    (("recipe", "show", URL), ""),
    (("bench", "tiny-cpu", "--vs", URL), "--vs "),
    (("check", "--facts", URL), "--facts "),
    (("diff", URL, "b.json"), "A.json "),
    (("report", "--facts", URL), "--facts "),
    (("explain", URL), ""),
    (("mods", "check", URL), "PATHS "),
    (("bench", "--url", "http://127.0.0.1:9", "--reproduce", URL), "--reproduce "),
])
def test_a_url_given_for_a_file_is_one_line_naming_it(tmp_path, args, label):
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    code, _, err = invoke(*args, env=env)
    assert code == 2 and f"{label}{URL}: a URL; sparkdoctor reads local files" in err and "\n" not in err, (code, err)


def test_a_host_that_cannot_be_looked_up_is_said_in_words(tmp_path):
    """Where a URL is read (`matrix update`), a name that does not resolve (no network; `.invalid` never does) was
    `gaierror: [Errno -2] Name or service not known`."""
    env = {"SPARKDOCTOR_STATE_DIR": str(tmp_path / "state"), "SPARKDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    code, _, err = invoke("matrix", "update", "https://nowhere.invalid/m.tar.gz", "--sha256", "a" * 64, env=env)
    assert code == 2 and "https://nowhere.invalid/m.tar.gz: cannot look up nowhere.invalid (" in err, (code, err)
    assert "gaierror" not in err and "\n" not in err
