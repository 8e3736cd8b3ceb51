"""The anonymizer: what a bug report must not carry out of the box, replaced before it is written.

A report is pasted into a public issue or forum thread, so by default it carries no user name, host
name, home path, IP (v4 or v6) or MAC address, and no token or key. Two kinds of knowledge do it:

  - identities learned from the Facts (and, for a live run, from this machine): the user names in
    home paths, the host name fields, the values of secret-named and address-named environment
    variables. Each is replaced as a whole word wherever it appears, in any field and in findings.
  - shapes that are secret whatever field holds them: Hugging Face (hf_...), OpenAI (sk-...), GitHub
    (ghp_..., github_pat_...), NGC (nvapi-...), AWS (AKIA...), Slack (xox?-...) tokens, bearer
    tokens, `token=`/`password=` pairs, credentials in URLs, IPv4/IPv6/MAC addresses.

Loopback and unspecified addresses (127.0.0.1, ::1, 0.0.0.0, ::) are kept: they name no machine and
say a lot about a bind. A version field (packages.*.version, a ptxas version) never loses an
IP-shaped value (nvidia-cublas 12.4.5.8 is not an address); the same literal elsewhere is kept too,
so findings that quote an installed version read right.

The replacements are fixed words (<user>, <host>, <ip>, <mac>, <redacted>) that no pattern matches
again, so redacting twice changes nothing.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

USER, HOST, IP, MAC, SECRET = "<user>", "<host>", "<ip>", "<mac>", "<redacted>"

# Environment variable names whose values are secrets (the probe already redacts these; a snapshot
# written by hand or by an older sparkdoctor may not have).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
# Names whose values are addresses or host names of this box or its peers.
ADDRESS_NAME = re.compile(r"HOST|ADDR|(?:^|_)IP(?:$|_)|MASTER|PEER|NODES?$", re.IGNORECASE)
HOST_KEYS = ("hostname", "host_name", "node", "nodename", "fqdn", "name")
# Accounts that name no person: never learned as a user name.
SYSTEM_USERS = frozenset({"root", "nobody", "ubuntu", "admin", "user", "home", "runner", "docker", "nvidia", "opt", "usr"})
# Host names too generic to replace in text.
GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "auto", "none", "local",
                           "head", "true", "false", "any", "default"})

_W = "A-Za-z0-9_"  # a word character (ASCII: what names and addresses are made of)
_NAME = "A-Za-z0-9"  # a learned name is replaced between any other characters: alice_run.log -> <user>_run.log

TOKEN_PATTERNS = [
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{8,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{8,}"),
    re.compile(r"\bnvapi-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),  # a JWT
]
# `Bearer abc`, `Authorization: Basic abc`: keep the word, drop what follows.
AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+|=|:\s*)(?!<)([^\s\"',;]+)")
# `password=abc`, `api_key: abc`, `"token": "abc"` in free text.
# `password=abc`, `api_key: abc`, `"token": "abc"` in free text: any name=value pair, kept unless the
# name holds a secret word (a name is one run of name characters, so scanning stays linear).
NAME_VALUE = re.compile(r"(?<![A-Za-z0-9_\-])([A-Za-z0-9_\-]+)(\"?\s*[=:]\s*\"?)(?!<)([^\s\"',;&]+)")
SECRET_WORD = re.compile(r"(?i)key|token|secret|passw(?:or)?d|credential|auth")
URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*://)[^\s/@:]+(?::[^\s/@]*)?@")
HOME_PATH = re.compile(r"(/home/|/Users/|/var/home/|/export/home/)([^/\s\"'`<>:]+)")
MAC_ADDRESS = re.compile(rf"(?<![{_W}:\-])(?:[0-9A-Fa-f]{{2}}([:\-]))(?:[0-9A-Fa-f]{{2}}\1){{4,18}}[0-9A-Fa-f]{{2}}(?![{_W}:\-])")
IPV4 = re.compile(rf"(?<![{_W}.])(?:\d{{1,3}}\.){{3}}\d{{1,3}}(?![{_W}]|\.\d)")
# Runs of hex digits, colons and dots (linear to scan); those with two colons that parse are addresses.
IPV6_CANDIDATE = re.compile(rf"(?<![{_W}:.])[0-9A-Fa-f:.]+(?:%[{_W}]+)?(?![{_W}:])")

KEY_WITH_DATA = re.compile(r"[/.:@\s]")

# Facts paths whose strings are versions: never read as IPv4 addresses.
VERSION_KEYS = frozenset({"version", "ptxas_version", "package_version", "cuda", "libcuda", "bundled_cuda", "kernel"})


@dataclass
class Redactor:
    """Replaces learned identities and secret-shaped text. `enabled=False` returns text unchanged."""

    users: set[str] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    secrets: set[str] = field(default_factory=set)
    versions: set[str] = field(default_factory=set)
    enabled: bool = True
    _compiled: Any = None

    # ---- learning -------------------------------------------------------------------------------
    def learn_user(self, name: Any) -> None:
        if isinstance(name, str) and name and name not in SYSTEM_USERS and not name.startswith("<"):
            self.users.add(name)
            self._compiled = None

    def learn_host(self, name: Any) -> None:
        if not isinstance(name, str):
            return
        name = name.strip().rstrip(".")
        if len(name) < 2 or name.lower() in GENERIC_HOSTS or name.startswith("<") or _is_address(name):
            return
        self.hosts.add(name)
        short = name.split(".", 1)[0]
        if len(short) >= 2 and short.lower() not in GENERIC_HOSTS:
            self.hosts.add(short)
        self._compiled = None

    def learn_secret(self, value: Any) -> None:
        if isinstance(value, str) and len(value) >= 6 and value != SECRET:
            self.secrets.add(value)
            self._compiled = None

    def learn_facts(self, data: dict[str, Any]) -> None:
        """Learn from a Facts dict: host name fields, env values, user names in every home path."""
        host = data.get("host") if isinstance(data.get("host"), dict) else {}
        for key in HOST_KEYS:
            if key != "name":
                self.learn_host(host.get(key))
        for key, value in (data.get("env") or {}).items() if isinstance(data.get("env"), dict) else ():
            if not isinstance(value, str):
                continue
            if SECRET_NAME.search(str(key)):
                self.learn_secret(value)
            elif ADDRESS_NAME.search(str(key)):
                for part in re.split(r"[\s,;]+", value):
                    host_part = part.rsplit("@", 1)[-1].split(":", 1)[0] if part.count(":") <= 1 else part
                    if host_part and not re.fullmatch(r"[\d.]+|[0-9A-Fa-f:]+", host_part):
                        self.learn_host(host_part)
        for path, value in _walk(data, ()):
            if isinstance(value, str):
                if path and path[-1] in VERSION_KEYS:
                    self.versions.add(value)
                for match in HOME_PATH.finditer(value):
                    self.learn_user(match.group(2))

    def learn_local(self) -> None:
        """This machine's user and host names (for a report made on the box it describes)."""
        import getpass
        import os
        import socket

        try:
            self.learn_user(getpass.getuser())
        except Exception:  # no user name in the environment or the password database
            pass
        self.learn_user(os.path.basename(os.path.expanduser("~").rstrip("/")))
        for getter in (socket.gethostname, socket.getfqdn):
            try:
                self.learn_host(getter())
            except OSError:
                pass

    # ---- redacting ------------------------------------------------------------------------------
    def text(self, value: str, is_version: bool = False) -> str:
        if not self.enabled or not isinstance(value, str) or not value:
            return value
        out = value
        for secret in sorted(self.secrets, key=len, reverse=True):
            out = out.replace(secret, SECRET)
        out = URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{SECRET}@", out)
        for pattern in TOKEN_PATTERNS:
            out = pattern.sub(SECRET, out)
        out = AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{SECRET}", out)
        out = NAME_VALUE.sub(_secret_pair, out)
        out = HOME_PATH.sub(lambda m: m.group(1) + (m.group(2) if m.group(2).startswith("<") else USER), out)
        users, hosts = self._patterns()
        if hosts is not None:
            out = hosts.sub(HOST, out)
        if users is not None:
            out = users.sub(USER, out)
        out = MAC_ADDRESS.sub(MAC, out)
        out = IPV6_CANDIDATE.sub(self._ipv6, out)
        if not is_version:
            out = IPV4.sub(self._ipv4, out)
        return out

    def data(self, value: Any, path: tuple[str, ...] = ()) -> Any:
        """A copy of a JSON-able value with every string (keys included) redacted; secret-named env
        values become <redacted> whatever they hold."""
        if not self.enabled:
            return value
        if isinstance(value, str):
            return self.text(value, is_version=bool(path) and path[-1] in VERSION_KEYS)
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                # a key that can hold a path or an address (files_shared, probe ids) is redacted; a
                # schema key (version, kind) is kept even if a learned name is spelled like it
                new_key = self.text(key) if isinstance(key, str) and KEY_WITH_DATA.search(key) else key
                if path == ("env",) and isinstance(key, str) and SECRET_NAME.search(key) and isinstance(item, str):
                    out[new_key] = SECRET
                else:
                    out[new_key] = self.data(item, (*path, str(key)))
            return out
        if isinstance(value, list):
            return [self.data(item, path) for item in value]
        return value

    def _patterns(self) -> tuple[Any, Any]:
        if self._compiled is None:
            self._compiled = (_words(self.users), _words(self.hosts))
        return self._compiled

    def _ipv4(self, match: re.Match[str]) -> str:
        text = match.group(0)
        if text in self.versions:
            return text
        try:
            address = ipaddress.IPv4Address(text)
        except ValueError:
            return text  # 999.1.1.1: not an address
        return text if address.is_loopback or address.is_unspecified else IP

    def _ipv6(self, match: re.Match[str]) -> str:
        text = match.group(0)
        core = text.rstrip(".")  # `... from fe80::1.` ends a sentence
        tail = text[len(core):]
        if core.split("%", 1)[0].count(":") < 2:
            return text
        try:
            address = ipaddress.IPv6Address(core.split("%", 1)[0])
        except ValueError:
            return text
        return text if address.is_loopback or address.is_unspecified else IP + tail


def redactor_for(data: dict[str, Any], enabled: bool = True, local: bool = False) -> Redactor:
    """A Redactor that knows this snapshot's identities (and this machine's, when `local`)."""
    redactor = Redactor(enabled=enabled)
    if enabled:
        redactor.learn_facts(data)
        if local:
            redactor.learn_local()
    return redactor


def _secret_pair(match: re.Match[str]) -> str:
    if SECRET_WORD.search(match.group(1)) and match.group(3).lower() not in ("bearer", "basic"):  # AUTH_SCHEME's job
        return f"{match.group(1)}{match.group(2)}{SECRET}"
    return match.group(0)


def _words(names: Iterable[str]) -> Any:
    ordered = sorted({n for n in names if n}, key=len, reverse=True)
    if not ordered:
        return None
    return re.compile(rf"(?<![{_NAME}])(?:{'|'.join(re.escape(n) for n in ordered)})(?![{_NAME}])")


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
        return True
    except ValueError:
        return False


def _walk(value: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, (*path, str(key)))
            if isinstance(key, str):
                yield path, key
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, path)
    else:
        yield path, value


# The line every report carries about what was (or was not) anonymized.
REDACTED_NOTE = ("Anonymized by sparkdoctor: user names, host names, home paths, IP and MAC addresses, tokens and keys "
                 "are replaced by <user>, <host>, <ip>, <mac>, <redacted>. Read it before you post it.")
NOT_REDACTED_NOTE = "NOT anonymized (--no-redact): user names, host names, addresses and paths are as found."
