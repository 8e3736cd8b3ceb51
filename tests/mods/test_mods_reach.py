"""What a mod's script can reach, for real under bwrap: only the sockets its network namespace confines (AF_VSOCK,
which a network namespace does not confine and which on a virtual machine reaches the hypervisor's services, fails
with EPERM like a unix socket, whether or not this kernel has vsock; TCP and getaddrinfo's netlink still work, so a
download fails as "Network is unreachable" and the verdict says the mod needs the network), and of the files beside
a script mod, none."""

from __future__ import annotations

import pytest

from sparkdoctor.mods.judge import judge_mod
from sparkdoctor.mods.model import Verdict
from tests.mods.test_mods_sandbox import tree  # noqa: F401  (the fixture)
from tests.mods.test_mods_scripts import folder


@pytest.fixture(autouse=True)
def _tools(sandbox_tools):
    pass


PROBE = ("import socket, sys\n"
         "for family, kind in ((40, socket.SOCK_STREAM), (44, socket.SOCK_RAW), (17, socket.SOCK_RAW)):\n"
         "    try:\n"
         "        socket.socket(family, kind)\n"
         "    except PermissionError:\n"
         "        continue\n"
         "    except OSError as exc:\n"
         "        sys.exit(f'family {family}: {exc}, not refused by the filter')\n"
         "    sys.exit(f'family {family} was made')\n"
         "socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()\n"
         "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()\n")


def test_a_script_makes_no_socket_its_network_namespace_does_not_confine(tmp_path, tree):  # noqa: F811
    mod = folder(tmp_path, "set -e\npython3 probe.py\n", probe_py=PROBE)
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.NO_EFFECT, result


def test_a_download_still_reads_as_needing_the_network(tmp_path, tree):  # noqa: F811
    fetch = "import urllib.request\nurllib.request.urlopen('http://192.0.2.1/x', timeout=5)\n"
    mod = folder(tmp_path, "set -e\npython3 fetch.py\n", fetch_py=fetch)
    result = judge_mod(mod, tree)
    assert result.verdict is Verdict.CANNOT_TELL and "needs the network" in result.detail, result



def test_a_script_mod_is_copied_alone_never_the_folder_it_lies_in(tmp_path, tree):  # noqa: F811
    """`mods check ~/fix.sh` copied the whole folder the script lies in into the sandbox: the home, with ~/.ssh and
    ~/.aws, reached the script (and so did a whole /tmp, or a recipe repository of any size)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("canary-key\n")
    (home / "notes.txt").write_text("canary-notes\n")
    script = home / "fix.sh"
    script.write_text("set -e\nls -A >&2\n[ \"$(ls -A)\" = fix.sh ] || exit 7\n")
    result = judge_mod(script, tree)
    assert result.verdict is Verdict.NO_EFFECT, result
