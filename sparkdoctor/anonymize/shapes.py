"""Secret- and identity-shaped text the anonymizer finds by its form, not by having learned it.

Every scan here is linear in the length of the text (a 1 MB line of base64 or JSON in well under a second):
each pattern is anchored at the start of a run by a look-behind on the run's own characters, so a run is tried
from one place only, and nothing that was matched is scanned twice by the same pattern.

  pairs      `name=value`, `name: value`, `"name": "value"`, `{'name': 'value'}`, `--flag value`, `?token=value&...`, a pair
             inside a pair's value (`error: password=hunter2`): the value of a name that says key, token,
             secret, password, credential or auth is a secret; the value of a name that says host or address
             is a host (unless it is an IP or loopback, which the address scan judges).
  encoded    a pair percent-encoded in a URL's parameter (`%3Faccess_token%3Dabc%26page%3D2`): a secret-named
             value, to the next %26, &, quote or space.
  headers    `X-Auth-Token abc...`: a secret header in header case with one space for its colon, a token of 8+
             (a plain word only after an X- header: `Multi-Token Prediction` is prose).
  emails     `someone@example.org`
  user@host  `bob@10.0.0.5`, `bob@spark-2`: the user is replaced, the host learned.
  URL hosts  `http://spark-2:8000/`: a host of one label or a private suffix (.lan, .local, ...) is a
             machine of the user's, learned; every URL host outside PUBLIC_HOSTS is replaced.
  FQDNs      `gitlab.acme-corp.com` in any text: a dotted name ending in a common top-level domain (or a private
             suffix) is a host, replaced unless it is one of PUBLIC_HOSTS (file names end in .py, .sh, .md, .so,
             .cu, .in: those look-alike TLDs are not in the list).
  PEM        a whole `-----BEGIN ...-----` block to its END (or to the end of the text, when cut), and the base64
             before an END whose BEGIN was cut off (an OpenSSH key's last line names its owner and host).
  -pPASSWORD mysql/mariadb's password glued to -p.
  random     a run of 32+ characters of a key alphabet with upper and lower case and digits and a high
             character entropy: a generated secret whatever holds it (git hashes and digests are hex: kept).
  serials    a GPU's or MIG device's UUID (`GPU-8f3c5a0e-...`, as CUDA_VISIBLE_DEVICES and nvidia-smi name one) and
             the value of a serial- or UUID-named pair (`Serial Number: 1324...`, `board_serial=...`, torch's
             `uuid=8f3c...`, `board serial 1324...`): one piece of hardware.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable

NAMECH = r"A-Za-z0-9_\-"
SECRET_SEGMENTS = frozenset({"key", "token", "secret", "password", "passwd", "pass", "pwd", "pw", "credential", "credentials", "auth",
                             "authorization", "cookie", "apikey", "pat", "passphrase", "privatekey",
                             "sig", "signature"})  # sig=: an Azure SAS URL's signature
SECRET_ENDINGS = ("key", "token", "secret", "password", "passwd")
ADDRESS_WORD = re.compile(r"(?i)(?:^|[_\-])(?:host(?:name)?|addr(?:ess)?|master|peer|ip)(?:$|[_\-])|^host")
# A name and its separator, the value not consumed: the scan goes on inside it (a pair in a pair's value).
# A quote of either kind around the name or the value: JSON's "name": "value", and Python's {'name': 'value'},
# Namespace(name='value'), NAME='value' in a shell line (vLLM logs its arguments as a Python dict).
NAME_SEP = re.compile(rf"(?<![{NAMECH}])([{NAMECH}]+)(['\"]?[ \t]*[=:][ \t]*(?:\[(?=['\"]))?(['\"]?)|[ \t]+(['\"]?))")
VALUE = re.compile(r"(?!<)[^\s\"',;&<>()\[\]{}]+")
HOST_VALUE = re.compile(r"(?!<)[^\s\"',;&<>()\[\]{}]{1,300}")
# A quoted secret value, to its closing quote (spaces and escapes in it too; 256 characters at most: linear).
QUOTED = {q: re.compile(rf"(?!<)(?:[^{q}\\\n]|\\.){{1,256}}(?={q})") for q in "'\""}
# A pair percent-encoded inside a URL's parameter (`?next=%2Fcb%3Faccess_token%3Dabc%26page%3D2`): a name run starts
# after a %XX escape or a non-name character (so each run is tried once), its `=` is %3D, its value runs to %26, &,
# a quote or a space.
ENCODED_PAIR = re.compile(rf"(?:(?<=%[0-9A-Fa-f]{{2}})|(?<![{NAMECH}%]))([{NAMECH}]+)%3[Dd](?!<)((?:[^\s&%\"']|%(?!26))+)")
# A header written with one space for its colon (`X-Auth-Token abc...`): a name in header case with a hyphen (prose
# has `the token is`, `api-key argument`; `Authorization Required` is nginx's 401 page), then a token of 8+.
CREDENTIAL_HEADERS = ("-authorization", "private-token", "job-token", "deploy-token", "api-key", "access-token")
HEADER_SPACED = re.compile(r"(?<![A-Za-z0-9_\-])((?:[A-Z][A-Za-z0-9]*-)+[A-Z][A-Za-z0-9]*) (?!<)([A-Za-z0-9_~+/.=\-]{8,})"
                           r"(?=[\s\"',;)\]}]|$)")
EMAIL = re.compile(r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9\-])")
USER_AT = re.compile(r"(?<![A-Za-z0-9._%+\-/])([A-Za-z_][A-Za-z0-9._\-]*)@(\[?[0-9A-Fa-f:.]+\]?|<ip>|<host>|[A-Za-z][A-Za-z0-9\-]*)(?![A-Za-z0-9.\-@])")
# A URL's host, after its user-info if any (`http://admin:pw@10.0.0.9/`: admin is a user, not the host)
URL_HOST = re.compile(r"(?i)(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*://(?:[^\s/@]*@|(?![^\s/@]*@))([A-Za-z][A-Za-z0-9\-]*(?:\.[A-Za-z0-9\-]+)*)")
PRIVATE_SUFFIXES = (".lan", ".local", ".internal", ".home", ".localdomain", ".corp", ".intranet", ".cluster", ".private")
# The public services a GB10 report names (package indexes, code and model hosts, NVIDIA's docs, forum and
# registry): kept. Exact names: a subdomain of one (an in-house gitlab.nvidia.com) is some employer's machine.
PUBLIC_HOSTS = frozenset({"pypi.org", "files.pythonhosted.org", "github.com", "raw.githubusercontent.com", "huggingface.co",
                          "hf.co", "nvidia.com", "docs.nvidia.com", "developer.nvidia.com", "forums.developer.nvidia.com",
                          "developer.download.nvidia.com", "catalog.ngc.nvidia.com", "nvcr.io", "pytorch.org",
                          "download.pytorch.org", "docker.io", "ghcr.io", "python.org"})
_TLDS = ("com|net|org|io|ai|dev|app|cloud|co|edu|gov|mil|int|biz|info|me|us|uk|de|fr|jp|cn|kr|tw|ca|au|nl|se|ch|eu|ru|"
         "br|es|fi|dk|be|at|ie|il|sg|hk|nz|cz|lan|local|internal|localdomain|corp|intranet")
# Dotted labels ending in one of _TLDS, anchored at a run's start (linear: a label cannot end but at a dot);
# fqdn_host() then wants a letter in the label before the top-level domain (1.2.dev is a version).
FQDN = re.compile(rf"(?i)(?<![A-Za-z0-9_.@\-])((?:[A-Za-z0-9\-]{{1,63}}\.)+(?:{_TLDS}))(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])")
PEM_EDGE = re.compile(r"-{4,5} ?(BEGIN|END) [A-Z0-9 ]{1,40}?-{4,5}")
_B64_TAIL = re.compile(r"(?:[A-Za-z0-9+/]{8,}={0,2}|[A-Za-z0-9+/]+={1,2})\s*$")
MYSQL = re.compile(r"(?<![\w-])(?:mysql(?:dump|admin|import|check|show|pump|sh)?|mariadb(?:-dump|-admin)?)(?![\w-])")
GLUED_P = re.compile(r"(?<=\s)-p(?![\s-])('[^']*'|\"[^\"]*\"|[^\s;|&]+)")
# A password or key given as the next word: `docker|podman|nerdctl|helm login ... -p|--password X`, `sshpass -p X`,
# `wandb login KEY`, `huggingface-cli login --token X` (that flag is secret-named already)
LOGIN_PASSWORD = re.compile(r"(?<![\w-])(?:(?:docker|podman|nerdctl|helm)[ \t]+(?:registry[ \t]+)?login\b[^\n;|&]{0,300}?"
                            r"(?:-p|--password)|sshpass[ \t]+-p)(?:[ \t]+|=)('[^']*'|\"[^\"]*\"|[^\s;|&]+)")
WANDB_LOGIN = re.compile(r"(?<![\w-])wandb[ \t]+login(?:[ \t]+-[-A-Za-z]+)*[ \t]+([^\s;|&-][^\s;|&]*)")
# curl's and wget's user:password (`curl -u bob:hunter2`, `--user=bob:hunter2`, `--proxy-user bob:hunter2`)
USER_PASSWORD = re.compile(r"(?<![\w-])(?:-u|-U|--user|--proxy-user)(?:[ \t]+|=)?['\"]?[^\s:'\"]+:([^\s'\"]+)")
KEYLIKE = re.compile(r"(?<![A-Za-z0-9_+/\-])[A-Za-z0-9_+\-][A-Za-z0-9_+/\-]{31,}={0,2}(?![A-Za-z0-9_+/=\-])")
# `ssh spark-2`, `node gpu-12`: a word that says a machine follows, and a name with a digit or a hyphen after it;
# ssh's options come first (`ssh -i KEY -p 2222 spark-2`): OpenSSH's flags, and the letters that take a value.
_SSH_OPTION = r"[ \t]+(?:-[46AaCfGgKkMNnqsTtVvXxYy]+|-[BbcDEeFIiJLlmOoPpQRSWw][ \t]*[^\s]{1,256})"
HOST_AFTER = re.compile(rf"(?i)(?<![A-Za-z0-9_\-])(?:ssh(?:{_SSH_OPTION}){{0,16}}|scp|rsync|ping|host|hostname|node|peer)"
                        r"[ \t]+([A-Za-z][A-Za-z0-9\-]*(?:\.[A-Za-z0-9\-]+)*)")
# NCCL's `host:pid:tid [rank]` prefix, at a line's start or after the `(RayWorkerWrapper pid=...)` prefix vLLM and Ray add
NCCL_HOST = re.compile(r"(?m)(?:^|\)[ \t]+)([A-Za-z][A-Za-z0-9\-]*):\d+:\d+ \[\d+\]")
# scp/rsync's `HOST:/path` and `HOST:~/path`: a name with a digit or a hyphen (a machine's, not `C:` or `http:`)
# (one name run, then `:`: linear; the digit or hyphen is checked on the match)
HOST_PATH = re.compile(r"(?<![A-Za-z0-9_./:@\-])(?!(?i:utf|iso|ucs)-)([A-Za-z][A-Za-z0-9\-]*):(?=[/~])(?!//)")
NOT_HOSTS = frozenset({"localhost", "true", "false", "none", "null", "auto", "any", "all", "default", "local", "host", "<host>",
                       "<ip>", "unix", "file", "http", "https", "tcp", "udp"})
WORDISH = re.compile(r"[a-z]{3,}|[A-Z]{4,}|\d{3,}")
WORD_SHARE = 0.55
ENTROPY_BITS = 4.3  # per character: random base62/64 of 32-40 characters measures 4.6-5.2; identifiers 3.3-4.1
VERSION_OPERATOR = re.compile(r"[=!~<>]=\s?$")  # PEP 440's comparison right before a dotted quad: not an address
SERIAL = "<serial>"
# NVIDIA's device UUIDs: GPU-<uuid>, MIG-<uuid> and the older MIG-GPU-<uuid>/GI/CI; the prefix is kept (the form says
# how a launch named its device), the UUID is the device's own.
_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
DEVICE_UUID = re.compile(rf"(?<![A-Za-z0-9_\-])((?:MIG-)?(?:GPU|MIG)-){_UUID}(?![A-Za-z0-9_\-])")
# `Serial Number : 1324...` (nvidia-smi -q), `serial=...`, `board_serial: ...`, `"SerialNumber": "..."`, and a UUID by
# name: torch prints a device's as `uuid=8f3c5a0e-...` (no GPU- prefix); a value ending at a `<` was replaced already
_SERIAL_NAME = r"(?:[A-Za-z]+[ _\-]?)?(?:serial(?:[ _\-]?(?:number|num|no))?|uuid)"
SERIAL_NAME = re.compile(rf"(?i){_SERIAL_NAME}")
# (a space alone is a separator before a value of 8+ characters with a digit: `board serial 1652524012345`, not `USB
# serial converter`)
SERIAL_PAIR = re.compile(rf"(?i)(?<![A-Za-z0-9])({_SERIAL_NAME}(?:['\"]?[ \t]*[:=][ \t]*['\"]?|"
                         r"[ \t]+(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]{8})))"
                         r"(?!<)(?![A-Za-z0-9_\-]*<)([A-Za-z0-9][A-Za-z0-9_\-]{3,63})")


def serials(text: str) -> str:
    """`text` with device UUIDs and serial-named values replaced by <serial>."""
    text = DEVICE_UUID.sub(lambda m: m.group(1) + SERIAL, text)
    return SERIAL_PAIR.sub(lambda m: m.group(1) + SERIAL, text)


def serial_field(key: object, value: object) -> str | None:
    """The value of a serial- or UUID-named field of a JSON document (`"serial": 1652524012345`), as the text scan
    replaces it in `serial: VALUE`; None for any other field (the key was not in the text the scan reads)."""
    if not isinstance(key, str) or not SERIAL_NAME.fullmatch(key) or not isinstance(value, (str, int)) or isinstance(value, bool):
        return None
    return serials(f"{key}: {value}")[len(key) + 2:]


def secret_name(name: str) -> bool:
    """A name that says its value is a secret: one of its parts (split at _ - . and camelCase) is key, token,
    secret, password, auth... or ends so (apikey, hftoken). `tokenizer` and `max_tokens` are not, nor a name ending
    in id or ids: an LLM's `eos_token_id`, `stop_token_ids` and `prompt_token_ids` are numbers of its vocabulary."""
    parts = [p for p in re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", name.strip("-")) if p]
    if parts and parts[-1].lower() in ("id", "ids"):
        return False
    return any(p.lower() in SECRET_SEGMENTS or p.lower().endswith(SECRET_ENDINGS) for p in parts if p)


def is_random_secret(text: str, strict: bool = True) -> bool:
    """A generated key: 32+ characters, upper and lower case and digits, not hex, high character entropy, and
    (`strict`, for free text) not made of words: an identifier (Sm121aKernelDispatchForNvfp4GemmTiles) has 59% or
    more of its characters in runs of 3+ lower case letters, 4+ capitals or 3+ digits; of 20,000 random 32-40
    character keys 1-2% do (those are missed in free text, never in a variable's value, which is `strict=False`)."""
    if len(text) < 32 or not (re.search(r"[A-Z]", text) and re.search(r"[a-z]", text) and re.search(r"\d", text)):
        return False
    if re.fullmatch(r"[0-9A-Fa-f\-]+", text):
        return False
    counts = Counter(text)
    bits = -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())
    if bits < ENTROPY_BITS:
        return False
    return not strict or sum(len(w) for w in WORDISH.findall(text)) / len(text) < WORD_SHARE


def hostish(value: str) -> str | None:
    """The host a host-named value names (`spark-2`, `spark-2:29500`, `tcp://node-1`), or None for an IP, a
    keyword or something that is no host name."""
    value = value.strip("\"'")
    value = re.sub(r"^[a-z]+://", "", value)
    value = value.rsplit("@", 1)[-1]
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9\-]*(?:\.[A-Za-z0-9\-]+)*", value) or value.lower() in NOT_HOSTS:
        return None
    return value


def public_host(host: str) -> bool:
    """One of PUBLIC_HOSTS (www. or not)."""
    return host.lower().rstrip(".").removeprefix("www.") in PUBLIC_HOSTS


def fqdn_host(name: str) -> bool:
    """A dotted name FQDN matched that is a host to replace: a letter in its second-level label, not public."""
    labels = name.split(".")
    return bool(re.search(r"[A-Za-z]", labels[-2])) and not public_host(name)


def pem_spans(text: str) -> list[tuple[int, int]]:
    """The spans of PEM/OpenSSH blocks: BEGIN to END (or to the end of a cut text), and for an END without its
    BEGIN, the base64 right before it (the key's last lines)."""
    spans: list[tuple[int, int]] = []
    at = 0
    for m in PEM_EDGE.finditer(text):
        if m.start() < at:
            continue
        if m.group(1) == "BEGIN":
            end = next((e.end() for e in PEM_EDGE.finditer(text, m.end()) if e.group(1) == "END"), len(text))
            spans.append((m.start(), end))
            at = end
            continue
        start, floor = m.start(), max(at, m.start() - 16384)  # a 16 KiB key's worth, no more
        while start > floor and (tail := _B64_TAIL.search(text, max(floor, start - 80), start)):
            start = tail.start()
        spans.append((start, m.end()))
        at = m.end()
    return spans


def cli_password_spans(text: str) -> list[tuple[int, int]]:
    """The spans of passwords glued to -p on a mysql/mariadb command line (`mysql -uroot -phunter2 db`; patch's
    -p1 and the rest are other programs'), and the password of curl's `-u user:password`."""
    spans: list[tuple[int, int]] = []
    scanned = 0
    for m in MYSQL.finditer(text):
        if m.start() < scanned:
            continue  # its command line was read with the one before (each character is read once)
        scanned = min((i for i in (text.find(c, m.end(), m.end() + 400) for c in "\n;|&") if i != -1),
                      default=min(len(text), m.end() + 400))
        if (p := GLUED_P.search(text, m.end(), scanned)):
            spans.append(p.span(1))
    kept: list[tuple[int, int]] = []
    spans += [m.span(1) for pattern in (LOGIN_PASSWORD, WANDB_LOGIN) for m in pattern.finditer(text)]
    for span in sorted(spans + [m.span(1) for m in USER_PASSWORD.finditer(text)]):
        if not kept or span[0] >= kept[-1][1]:  # one cut per character
            kept.append(span)
    return kept


def private_host(host: str) -> bool:
    """A URL's host that names a machine of the user's, not a public service."""
    low = host.lower()
    return low not in NOT_HOSTS and ("." not in low or low.endswith(PRIVATE_SUFFIXES))


def scan_pairs(text: str, on_secret: Callable[[str], None], on_host: Callable[[str], None]) -> list[tuple[int, int]]:
    """The spans of secret values in `text` (for `name=value`, `--flag value` and the rest); host-named values
    are handed to on_host, secret ones to on_secret as well."""
    spans: list[tuple[int, int]] = []
    covered = 0
    for m in NAME_SEP.finditer(text):
        if m.start() < covered:
            continue
        name, sep = m.group(1), m.group(2)
        spaced = not sep.strip(" \t'\"")
        if spaced and not name.startswith("-"):
            continue  # `word value` is prose; only a --flag takes its value after a space
        secret = secret_name(name)
        if not secret and not ADDRESS_WORD.search(name.lstrip("-")):
            continue  # most names: their value is not even read (it is scanned for pairs of its own)
        quote = m.group(3) or m.group(4)
        v = (QUOTED[quote].match(text, m.end()) if secret and quote else None) or \
            (VALUE if secret else HOST_VALUE).match(text, m.end())  # a host value is short: bounded, so linear
        if v is None or (spaced and v.group(0).startswith("-")):
            continue
        if secret and v.group(0).lower() not in ("bearer", "basic", "token"):  # a scheme: the anonymizer's AUTH_SCHEME
            spans.append(v.span())
            on_secret(v.group(0))
            covered = v.end()
        elif not secret:
            host = hostish(v.group(0))
            if host and private_host(host):
                on_host(host)
    return spans


def encoded_pair_spans(text: str, on_secret: Callable[[str], None]) -> list[tuple[int, int]]:
    """The spans of secret values in percent-encoded pairs (`access_token%3Dabc`), each handed to on_secret too."""
    spans = []
    for m in ENCODED_PAIR.finditer(text):
        if secret_name(m.group(1)):
            spans.append(m.span(2))
            on_secret(m.group(2))
    return spans


def header_spans(text: str, on_secret: Callable[[str], None]) -> list[tuple[int, int]]:
    """The spans of values after a secret header and one space (`X-Auth-Token abc`, `X-Api-Key abc`): the header's
    last part is a secret name (Token, Key, Secret, Authorization...). After an X- header any value of 8+ (a plain
    word is hidden but not learned), after a credential header's name (Proxy-Authorization, Private-Token) any but
    a plain word; after another hyphenated name only a token-like value (16+, no `_`, letters and digits):
    `Multi-Token Prediction` and `Per-Token fp8_e4m3 quantization` are prose."""
    spans = []
    for m in HEADER_SPACED.finditer(text):
        name, value = m.group(1), m.group(2)
        if not secret_name(name.rsplit("-", 1)[-1]):
            continue
        word = re.fullmatch(r"[A-Za-z][a-z]*", value) is not None
        header = name.lower().endswith(CREDENTIAL_HEADERS)  # a real header's name: any value but a plain word
        tokenlike = len(value) >= 16 and "_" not in value and bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value))
        if name[:2] in ("X-", "x-") or (header and not word) or tokenlike:
            spans.append(m.span(2))
            if not word:
                on_secret(value)
    return spans


def learn_from_text(text: str, on_host: Callable[[str], None],
                    on_secret: Callable[[str], None]) -> None:
    """Identities that text shows by its form: the host of user@host, URL hosts, NCCL's host prefix, host-named pairs,
    secret-named pairs, random keys."""
    for m in USER_AT.finditer(text):
        host = hostish(m.group(2))
        if host and re.search(r"[\d\-]", host):  # a machine's name (spark-2, node01); `x@main` teaches nothing
            on_host(host)
    for m in URL_HOST.finditer(text):
        if private_host(m.group(1)):
            on_host(m.group(1))
    for m in NCCL_HOST.finditer(text):
        on_host(m.group(1))
    for m in (*HOST_PATH.finditer(text), *HOST_AFTER.finditer(text)):
        if re.search(r"[\d\-]", m.group(1)) and hostish(m.group(1)) and private_host(m.group(1)):
            on_host(m.group(1))
    scan_pairs(text, on_secret, on_host)
    encoded_pair_spans(text, on_secret)
    header_spans(text, on_secret)
    for m in KEYLIKE.finditer(text):
        if is_random_secret(m.group(0)):
            on_secret(m.group(0))


def value_secret(value: str) -> bool:
    """A variable's or an argument's whole value that is a generated key (the relaxed test)."""
    return is_random_secret(value, strict=False) and KEYLIKE.fullmatch(value) is not None


def argv_secrets(items: list[object]) -> list[str]:
    """The values that follow a secret-named flag in an argument list (`["--api-key", "abc"]`)."""
    out = []
    for flag, value in itertools.pairwise(items):
        if (isinstance(flag, str) and isinstance(value, str) and flag.startswith("-") and "=" not in flag
                and secret_name(flag) and value and not value.startswith("-")):
            out.append(value)
    return out


_TRIE_DEPTH = 200  # branch points on one path; deeper (`a`, `aa`, `aaa`, ... by the hundred) is a plain alternation


class _TooDeep(Exception):
    pass


def alternation(words: Iterable[str]) -> str:
    """A regex for any of `words`, the longest that matches first, laid out as a trie (a radix tree: each run that
    words share is written once): the engine follows one branch a character, not every word at every position
    (8,000 learned names were 12 s of redaction; 4x the names, 16x the time)."""
    chosen = sorted(set(words))
    try:
        return _radix(chosen, 0)
    except _TooDeep:
        return "|".join(re.escape(w) for w in sorted(chosen, key=len, reverse=True))


def _radix(words: list[str], depth: int) -> str:
    """`words` sorted and distinct ("" first, when one of them ends here)."""
    if depth > _TRIE_DEPTH:
        raise _TooDeep
    ends = words[0] == ""
    parts = []
    for _, grouped in itertools.groupby(words[1:] if ends else words, key=lambda w: w[0]):
        group = list(grouped)
        shared = os.path.commonprefix(group)
        parts.append(re.escape(shared) + _radix([w[len(shared):] for w in group], depth + 1))
    body = parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})" if parts else ""
    return f"(?:{body})?" if ends and body else body
