"""The anonymizer: what a bug report must not carry out of the box, replaced before it is written.

A report is pasted into a public issue or forum thread, so by default it carries no user name, host
name, home path, IP (v4 or v6) or MAC address, and no token or key. Two kinds of knowledge do it:

  - identities learned from the Facts (and, for a live run, from this machine): the user names in
    home paths, the host name fields, the values of secret-named and address-named environment
    variables. Each is replaced as a whole word wherever it appears, in any field and in findings (a host name
    in any case, as DNS reads it, when it has a digit or a hyphen; a plain word and a user name as learned).
  - shapes that are secret whatever field holds them: the providers' tokens (TOKEN_PATTERNS; cut by a line break
    too: wrapped.py), bearer tokens, credentials in URLs, IPv4/IPv6/MAC addresses, user names in per-user folders
    outside the homes (/scratch/NAME, /data/users/NAME), and what anonymize/shapes.py finds by form (its docstring
    lists them: secret-named pairs and flags, PEM blocks, passwords on command lines, e-mail addresses, other
    machines' names, FQDNs and URL hosts outside shapes.PUBLIC_HOSTS, generated keys, serial numbers).

A learned name of two characters or a common word (WEAK_NAMES: a host called `vm`) is replaced only where it
does not touch a / or a . , so /proc/sys/vm and vm.max_map_count survive a host named vm.

A zero-padded dotted quad (010.001.002.003) is the address it denotes (10.1.2.3), though ipaddress refuses it.
Loopback and unspecified addresses (127.0.0.1, ::1, 0.0.0.0, ::) are kept: they name no machine and
say a lot about a bind. A version field (packages.*.version, a ptxas version) never loses an
IP-shaped value (nvidia-cublas 12.4.5.8 is not an address); the same literal elsewhere is kept too,
so findings that quote an installed version read right.

The replacements are fixed words (<user>, <host>, <ip>, <mac>, <redacted>) that no pattern matches
again, so redacting twice changes nothing.
"""

from __future__ import annotations

import contextlib
import getpass
import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkdoctor import lookup
from sparkdoctor.anonymize import accounts, shapes, wrapped

USER, HOST, IP, MAC, SECRET, EMAIL = "<user>", "<host>", "<ip>", "<mac>", "<redacted>", "<email>"

# Names whose values are addresses or host names of this box or its peers.
ADDRESS_NAME = re.compile(r"HOST|ADDR|(?:^|_)IP(?:$|_)|MASTER|PEER|NODES?$", re.IGNORECASE)
HOST_KEYS = ("hostname", "host_name", "node", "nodename", "fqdn")
# Accounts that name no person: never learned as a user name.
SYSTEM_USERS = frozenset({"root", "nobody", "ubuntu", "admin", "user", "home", "runner", "docker", "nvidia", "opt", "usr"})
# A learned name of two characters, or one of these words, is also a path component or a word of its own
# (/proc/sys/vm, vm.max_map_count): it is replaced only where it does not touch a / or a . (`on vm as bob`).
WEAK_NAMES = frozenset({"vm", "net", "sys", "dev", "proc", "lib", "bin", "etc", "tmp", "var", "opt", "mnt", "data", "cache",
                        "models", "kernel", "srv", "run", "boot", "media", "share", "src", "build", "python", "cuda", "spark",
                        "gpu", "node", "server", "main", "test", "work", "lab", "box", "dgx", "nvme", "vllm",
                        "ubuntu", "debian", "linux", "nvidia", "gx10", "gb10"})
FQDN_TIMEOUT = 5.0  # seconds for this machine's fully qualified name (a reverse lookup)
ENV_KEYS = frozenset({"env", "environment"})  # a dict under one of these names holds environment variables
# Host names too generic to replace in text.
GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "auto", "none", "local",
                           "head", "true", "false", "any", "default"})

_W = "A-Za-z0-9_"  # a word character (ASCII: what names and addresses are made of)
_NAME = "A-Za-z0-9"  # a learned name is replaced between any other characters: alice_run.log -> <user>_run.log

TOKEN_PATTERNS = [
    re.compile(r"\bhf_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{8,}"),  # not all lower case: hf_transfer, hf_overrides are names
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9_]{8,}"),  # GitHub: [A-Za-z0-9_] (github.blog changelog 2021-03-31)
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{8,}"),
    re.compile(r"\bgl(?:pat|dt|rt|ptt|ft|imt|soat|cbt|oas)-[A-Za-z0-9_\-]{8,}"),  # GitLab
    re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{8,}"),  # Stripe secret and restricted keys
    re.compile(r"\bnvapi-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),  # a JWT
]
# `Bearer abc`, `Authorization: Basic abc`, `Authorization: token abc` (GitHub's API): keep the word, drop what follows.
AUTH_SCHEME = re.compile(r"(?i)(\b(?:bearer|basic)|\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?token)(\s+|=|:\s*)(?!<)([^\s\"',;]+)")
# `password=abc`, `--api-key abc`, `?token=abc&`, `error: password=abc` (a pair in a pair): shapes.scan_pairs.
# The password runs to the last @ of the next 256 characters: one pasted with a raw / or @ in it
# (`https://bob:se/cr3t@host`) goes whole. `host:5000/path@sha256:...` is a port, not a password.
URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.\-])([a-z][a-z0-9+.\-]*://)[^\s/@:]+(?::(?!\d{1,5}/)[^\s\"'<>]{0,256})?@")
# The name never starts with a dot: /home/.snapshots (snapper), /srv/ci/home/.local (a HOME called home) are folders.
HOME_PATH = re.compile(r"(/home/|/Users/|/var/home/|/export/home/|/media/|/run/media/)([^/\s\"'`<>:.][^/\s\"'`<>:]*)")
# The same path percent-encoded, as a URL or a file:// link carries it: %2Fhome%2Fbob
HOME_PATH_ENCODED = re.compile(r"((?i:%2F)(?:home|Users|media)(?i:%2F))([A-Za-z0-9_\-][A-Za-z0-9_.\-]*)")
# A per-user folder outside the homes: /scratch/NAME, /data/users/NAME, /lustre/people/NAME, /u/NAME.
USER_DIR = re.compile(r"(/(?:users?|people|scratch|homes|home\d+|u)/|(?<![\w~/.-])~(?!root[/\s]))([A-Za-z_][A-Za-z0-9_.\-]{0,31})(?=[/\s\"'`:]|$)")
USER_ENV = frozenset({"USER", "LOGNAME", "USERNAME", "SUDO_USER"})  # environment variables that name the user
MAC_ADDRESS = re.compile(rf"(?<![{_W}:\-])(?:[0-9A-Fa-f]{{2}}([:\-]))(?:[0-9A-Fa-f]{{2}}\1){{4,18}}[0-9A-Fa-f]{{2}}(?![{_W}:\-])")
IPV4 = re.compile(rf"(?<![A-Za-z0-9.])(?:\d{{1,3}}\.){{3}}\d{{1,3}}(?![{_W}]|\.\d)")  # after `_` only a private one
IPV4_DASHED = re.compile(r"(?<![A-Za-z0-9_.\-])ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?![A-Za-z0-9_\-])")  # a cloud host name
# An IPv6 address right after `name:` (NCCL's `enp1s0f0np0:fe80::...%enp1s0f0np0`, `addr:2001:db8::1`): the scan above
# will not start inside a word; this one does, and the address must parse
# (one start a run, one run of address characters: linear; whether it parses is the callback's)
IPV6_AFTER_NAME = re.compile(rf"(?<![{_W}:.])([{_W}]+:)([0-9A-Fa-f:.]+(?:%[{_W}]+)?)(?![{_W}:])")
# A JWT whose first and last parts were learned as keys: what is left between them is its claims
JOINED_SECRET = re.compile(r"<redacted>(?:\.[A-Za-z0-9_=-]+)+\.<redacted>")
# Runs of hex digits, colons and dots (linear to scan); those with two colons that parse are addresses.
IPV6_CANDIDATE = re.compile(rf"(?<![{_W}:.])[0-9A-Fa-f:.]+(?:%[{_W}]+)?(?![{_W}:])")

LONG_SECRET = 256  # a learned secret longer than this is replaced as a string (compiling a 1 MB one took seconds)
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
    _compiled: list[tuple[re.Pattern[str], str] | None] | None = None
    _long_secrets: list[str] = field(default_factory=list)

    # ---- learning -------------------------------------------------------------------------------
    def learn_user(self, name: object) -> None:
        if isinstance(name, str) and name and name not in SYSTEM_USERS and not name.startswith("<"):
            self.users.add(name)
            self._compiled = None

    def learn_host(self, name: object) -> None:
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

    def learn_secret(self, value: object) -> None:
        # a short number is not learned: `stop_token_ids=[151645]` would take every 151645 out of the report
        if isinstance(value, str) and len(value) >= 6 and value != SECRET and not (value.isdigit() and len(value) < 10):
            self.secrets.add(value)
            self._compiled = None

    def learn_facts(self, data: Mapping[str, object]) -> None:
        """Learn from a Facts dict: host name fields, env values, user names in every home path."""
        for host in (data.get("host"), data.get("fleet")):  # a fleet node's Facts name it: its `node` and `hostname`
            if isinstance(host, dict):
                for key in HOST_KEYS:
                    self.learn_host(host.get(key))
        env = data.get("env")
        for key, value in env.items() if isinstance(env, dict) else ():
            if not isinstance(value, str):
                continue
            if shapes.secret_name(str(key)):
                self.learn_secret(value)
            elif key in USER_ENV or key == "HOME":
                self.learn_user(value.rstrip("/").rsplit("/", 1)[-1])
            elif ADDRESS_NAME.search(str(key)):
                for part in re.split(r"[\s,;]+", value):
                    host_part = part.rsplit("@", 1)[-1].split(":", 1)[0] if part.count(":") <= 1 else part
                    if host_part and not re.fullmatch(r"[\d.]+|[0-9A-Fa-f:]+", host_part):
                        self.learn_host(host_part)
        for path, value in _walk(data, ()):
            if isinstance(value, str):
                if path and path[-1] in VERSION_KEYS:
                    self.versions.add(value)
                    continue
                for match in (*HOME_PATH.finditer(value), *HOME_PATH_ENCODED.finditer(value), *USER_DIR.finditer(value)):
                    self.learn_user(match.group(2))
                shapes.learn_from_text(value, self.learn_host, self.learn_secret)
            elif isinstance(value, list):
                for secret in shapes.argv_secrets(value):
                    self.learn_secret(secret)
                for item in value:
                    if isinstance(item, str) and shapes.value_secret(item):
                        self.learn_secret(item)
            elif isinstance(value, dict) and path and path[-1] in ENV_KEYS:
                for key, item in value.items():
                    if isinstance(item, str) and (shapes.secret_name(str(key)) or shapes.value_secret(item)):
                        self.learn_secret(item)

    def learn_local(self) -> None:
        """This machine's user and host names (for a report made on the box it describes)."""
        with contextlib.suppress(Exception):  # no user name in the environment or the password database
            self.learn_user(getpass.getuser())
        self.learn_user(os.path.basename(os.path.expanduser("~").rstrip("/")))
        for name in accounts.local_names():  # the password database's, when HOME and USER point elsewhere
            self.learn_user(name)
        with contextlib.suppress(OSError):
            self.learn_host(socket.gethostname())
            # the fully qualified name is a reverse lookup: one that never answered held `report` past its --timeout
            self.learn_host(lookup.getfqdn(FQDN_TIMEOUT) or "")

    # ---- redacting ------------------------------------------------------------------------------
    def text(self, value: str, is_version: bool = False) -> str:
        if not self.enabled or not isinstance(value, str) or not value:
            return value
        out = _cut(value, shapes.pem_spans(value))  # first: a key's lines must not be taken apart by other scans
        out = _cut(out, wrapped.spans(out))  # a token cut by a line break: both parts (anonymize/wrapped.py)
        secrets = self._patterns()[0]
        for secret in self._long_secrets:
            out = out.replace(secret, SECRET)
        if secrets is not None:
            out = secrets[0].sub(SECRET, out)
        out = _cut(out, shapes.cli_password_spans(out))
        out = URL_CREDENTIALS.sub(lambda m: f"{m.group(1)}{SECRET}@", out)
        for pattern in TOKEN_PATTERNS:
            out = pattern.sub(SECRET, out)
        out = AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{SECRET}", out)
        out = JOINED_SECRET.sub(SECRET, out)
        out = _cut(out, shapes.scan_pairs(out, _ignore, _ignore))
        out = _cut(out, shapes.encoded_pair_spans(out, _ignore))
        out = _cut(out, shapes.header_spans(out, _ignore))
        out = shapes.serials(out)  # before the key scan: a GPU's UUID keeps its GPU- prefix
        out = shapes.KEYLIKE.sub(lambda m: SECRET if shapes.is_random_secret(m.group(0)) else m.group(0), out)
        out = shapes.EMAIL.sub(EMAIL, out)
        out = shapes.USER_AT.sub(_user_at, out)
        out = shapes.URL_HOST.sub(_url_host, out)
        if not is_version:
            out = shapes.FQDN.sub(lambda m: HOST if shapes.fqdn_host(m.group(1)) else m.group(0), out)
        for path in (HOME_PATH, HOME_PATH_ENCODED, USER_DIR):
            out = path.sub(lambda m: m.group(1) + (m.group(2) if m.group(2).startswith("<") else USER), out)
        for found in self._patterns()[1:]:
            if found is not None:
                out = found[0].sub(found[1], out)
        out = MAC_ADDRESS.sub(MAC, out)
        out = IPV6_CANDIDATE.sub(lambda m: self._ipv6_text(m.group(0)), out)
        out = IPV6_AFTER_NAME.sub(lambda m: m.group(1) + self._ipv6_text(m.group(2)), out)
        if not is_version:
            out = IPV4.sub(self._ipv4, out)
            out = IPV4_DASHED.sub(lambda m: HOST if _ipv4_address(".".join(m.groups())) is not None else m.group(0), out)
        return out

    def data(self, value: object, path: tuple[str, ...] = ()) -> Any:
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
                if (path and path[-1] in ENV_KEYS and isinstance(key, str) and isinstance(item, str)
                        and shapes.secret_name(key)):
                    out[new_key] = SECRET
                else:  # a serial-named field as the text scan reads `serial: VALUE` (the key is not in the text)
                    out[new_key] = shapes.serial_field(key, item) or self.data(item, (*path, str(key)))
            return out
        if isinstance(value, list):
            after_secret_flag = {i + 1 for i, item in enumerate(value[:-1])
                                 if shapes.argv_secrets([item, value[i + 1]])}  # ["--api-key", "abc"]
            return [SECRET if i in after_secret_flag else self.data(item, path) for i, item in enumerate(value)]
        return value

    def _patterns(self) -> list[tuple[re.Pattern[str], str] | None]:
        """(pattern, replacement) for learned secrets, host names, then user names; strong and weak (see WEAK_NAMES). A
        host-shaped name (a digit or a hyphen: spark-7f3a) is matched in any case, as DNS reads it (Alice-Spark is
        ALICE-SPARK); a host that is a plain word (alice, workstation), a weak one and a user name as learned (`Bob`
        the user, `bob` a word; a host called ubuntu must not take `Ubuntu 24.04`)."""
        if self._compiled is None:
            strong = {n for n in self.hosts if not _is_weak(n)}
            shaped = {n for n in strong if re.search(r"[\d\-]", n)}
            short = [s for s in self.secrets if len(s) <= LONG_SECRET]
            self._long_secrets = sorted(self.secrets.difference(short), key=len, reverse=True)
            secrets = (re.compile(shapes.alternation(short)), SECRET) if short else None
            self._compiled = [secrets, _words(shaped, False, HOST, any_case=True), _words(strong - shaped, False, HOST),
                              _words(self.hosts, True, HOST), _words(self.users, False, USER), _words(self.users, True, USER)]
        return self._compiled

    def _ipv4(self, match: re.Match[str]) -> str:
        text = match.group(0)
        if text in self.versions or shapes.VERSION_OPERATOR.search(match.string, max(0, match.start() - 3), match.start()):
            return text  # `nvidia-cudnn-cu12==9.1.0.70` in a resolver's error is a version
        address = _ipv4_address(text)
        if address is None:
            return text  # 999.1.1.1: not an address
        if match.start() and match.string[match.start() - 1] == "_" and not address.is_private:
            return text  # `libcudnn_9.1.0.70` is a version; `ib_192.168.100.12` names a node
        return text if address.is_loopback or address.is_unspecified else IP

    def _ipv6_text(self, text: str) -> str:
        core = text.rstrip(".")  # `... from fe80::1.` ends a sentence
        tail = text[len(core):]
        if core.split("%", 1)[0].count(":") < 2:
            return text
        try:
            address = ipaddress.IPv6Address(core.split("%", 1)[0])
        except ValueError:
            return text
        return text if address.is_loopback or address.is_unspecified else IP + tail


def redactor_for(data: Mapping[str, object], enabled: bool = True, local: bool = False) -> Redactor:
    """A Redactor that knows this snapshot's identities (and this machine's, when `local`)."""
    redactor = Redactor(enabled=enabled)
    if enabled:
        redactor.learn_facts(data)
        if local:
            redactor.learn_local()
    return redactor


def _ignore(_value: str) -> None:
    pass


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each (start, end) span replaced by <redacted>."""
    if not spans:
        return text
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start], SECRET]
        at = end
    return "".join([*out, text[at:]])


def _user_at(match: re.Match[str]) -> str:
    host = match.group(2)
    bare = host.strip("[]")
    if bare.count(":") == 1:
        bare = bare.split(":", 1)[0]  # 10.0.0.5:22
    if host in (IP, HOST) or _is_address(bare) or host.lower() == "localhost":
        return f"{USER}@{host}"  # the address itself is the IP scan's
    if shapes.hostish(host):
        return f"{USER}@{HOST}"
    return match.group(0)  # vllm@0.11.0: a version, not a machine


def _url_host(match: re.Match[str]) -> str:
    host = match.group(1)
    if shapes.public_host(host) or host.lower() in shapes.NOT_HOSTS:
        return match.group(0)
    start = match.start(1) - match.start(0)
    return match.group(0)[:start] + HOST


def _is_weak(name: str) -> bool:
    return len(name) <= 2 or name.lower() in WEAK_NAMES


def _words(names: Iterable[str], weak: bool, word: str, any_case: bool = False) -> tuple[re.Pattern[str], str] | None:
    chosen = {n.lower() if any_case else n for n in names if n and _is_weak(n) == weak}
    if not chosen:
        return None
    edge = f"{_NAME}/." if weak else _NAME  # a weak name touching a / or a . is a path or a dotted name, not a host
    flags = re.IGNORECASE if any_case else 0
    return re.compile(rf"(?<![{edge}])(?:{shapes.alternation(chosen)})(?![{edge}])", flags), word


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
        return True
    except ValueError:
        return _ipv4_address(text) is not None


def _ipv4_address(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a dotted quad denotes, zero-padded parts too (each 1-3 digits, 0-255 without its zeros):
    Python's ipaddress refuses 010.001.002.003, an address all the same (padded tables and tools print them). Read
    in decimal; inet_aton reads a padded part in octal, which keeps or hides the same quads (loopback is 127.*)."""
    parts = text.split(".")
    if len(parts) != 4 or not all(re.fullmatch(r"[0-9]{1,3}", p) and int(p) <= 255 for p in parts):
        return None
    return ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))


def _walk(value: object, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], object]]:
    """Every value (containers too, before what they hold) with its path; a dict's keys as strings at its path."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, (*path, str(key)))
            if isinstance(key, str):
                yield path, key
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, path)


# The line every report carries about what was (or was not) anonymized.
REDACTED_NOTE = ("Anonymized by sparkdoctor: user names, host names, home paths, IP, MAC and e-mail addresses, GPU UUIDs and "
                 "serial numbers, tokens, keys and passwords are replaced by <user>, <host>, <ip>, <mac>, <email>, <serial>, "
                 "<redacted>. Read it before you post it.")
NOT_REDACTED_NOTE = "NOT anonymized (--no-redact): user names, host names, addresses and paths are as found."
