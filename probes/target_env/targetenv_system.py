"""The interpreter, the host, and what outside the packages decides a build: the relevant environment
variables (secrets redacted), ptxas binaries inside site-packages, the pip config files pip reads.
"""

import os
import platform
import sys

from probe_io import read_head
from targetenv_base import error
from targetenv_dists import read_record

ENV_NAMES = frozenset(
    {
        "TORCH_CUDA_ARCH_LIST",
        "FLASHINFER_CUDA_ARCH_LIST",
        "CUDA_HOME",
        "CUDA_VISIBLE_DEVICES",
        "PIP_CONSTRAINT",
        "PYTORCH_CUDA_ALLOC_CONF",
        "FLA_USE_TMA",
    }
)


ENV_PREFIXES = ("CUTE_DSL_", "TRITON_", "VLLM_")


SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
def redact_userinfo(value):
    """A URL's credentials in any value (a VLLM_*/TRITON_* URL with them in it) redacted, the rest kept. A URL runs to
    the next whitespace or the next `://`; its userinfo starts after `://` and ends at its first @ (`TOKEN@host`,
    `git+https://TOKEN@github.com/o/r.git@v1`), or at a later @ before the path when a password holds @ or / (a
    colon comes before any /: `user:p@ss@host`, `user:pa/ss@host`). A user holding @ (`me@corp:SECRET@host`) is
    redacted whole. More is redacted than needed where a port's path holds an @ (`host:8000/a@b`), never less. One
    pass: each character is read a bounded number of times."""
    out, at = [], 0
    while True:
        found = value.find("://", at)
        if found < 0:
            return "".join(out) + value[at:]
        start = found + 3
        stop = value.find("://", start)
        end = start
        limit = len(value) if stop < 0 else stop
        while end < limit and not value[end].isspace():
            end += 1
        url = value[start:end]
        first = url.find("@")
        head = url[:first] if first >= 0 else ""
        slash, colon = head.find("/"), head.find(":")
        if first < 0 or (slash >= 0 and not 0 <= colon < slash):
            out.append(value[at:end])  # no credentials, or an @ in a path (pkg@1.0)
            at = end
            continue
        path = url.find("/", first)
        last = url.rfind("@", 0, len(url) if path < 0 else path)
        info = url[:last]
        user = info.split(":", 1)[0]
        if ":" in info and "@" not in user:
            out.append(value[at:start] + user + ":<redacted>" + url[last:])
        else:
            out.append(value[at:start] + "<redacted>" + url[last:])
        at = end


MAX_CONFIG_TEXT = 65536


def describe_target():
    base_prefix = getattr(sys, "base_prefix", sys.prefix)
    return {
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "prefix": sys.prefix,
        "base_prefix": base_prefix,
        "is_venv": sys.prefix != base_prefix,
        "executable": sys.executable,
        "markers": marker_environment(),
    }


def marker_environment():
    """The PEP 508 marker variables of this interpreter, as packaging's default_environment() gives them (the
    sparkdoctor process evaluates each component's Requires-Dist markers against these, not its own)."""
    info = sys.implementation.version
    impl_version = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        impl_version += info.releaselevel[0] + str(info.serial)
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def describe_host():
    uname = os.uname()
    host = {"os": None, "machine": uname.machine, "kernel": uname.release}
    try:
        for line in read_head("/etc/os-release", MAX_CONFIG_TEXT)[0].decode("utf-8", "replace").splitlines():
            if line.startswith("PRETTY_NAME="):
                host["os"] = line.split("=", 1)[1].strip().strip("\"'")
                break
    except OSError as exc:
        error("cannot read /etc/os-release: %s" % (exc.strerror or exc))
    return host


def relevant_env():
    found = {}
    for name, value in os.environ.items():
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            upper = name.upper()
            found[name] = "<redacted>" if any(word in upper for word in SECRET_WORDS) else redact_userinfo(value)
    return dict(sorted(found.items()))


def ptxas_candidates(dists, records):
    found = []
    for dist in sorted(dists.values(), key=lambda d: d.canonical):
        if dist.canonical.startswith("nvidia-cuda-nvcc"):
            source = "pip"
        elif "triton" in dist.canonical:
            source = "triton"
        else:
            continue
        rows = records.get(dist.canonical)
        if rows is None:
            rows = read_record(dist, only="ptxas") or []
        for row in rows:
            rel = row[0]
            base = os.path.basename(rel)
            if base not in ("ptxas", "ptxas-blackwell") or "/bin/" not in rel:
                continue
            if source == "triton" and "backends/nvidia/bin/" not in rel:
                continue
            full = os.path.normpath(os.path.join(dist.location, rel))
            if not os.path.isfile(full):
                continue
            found.append(
                {
                    "path": full,
                    "source": source,
                    "package": dist.name,
                    "version_of_package": dist.version,
                    "binary": base,
                    "executable": os.access(full, os.X_OK),
                }
            )
    return found


def pip_config_files():
    """The config files pip would read for this interpreter, in pip's order, that exist."""
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []  # pip reads no config files at all then
    home = os.path.expanduser("~")
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    candidates = []
    if env_file:
        candidates.append(("env", env_file))
    for folder in xdg_dirs.split(os.pathsep):
        if folder:
            candidates.append(("global", os.path.join(folder, "pip", "pip.conf")))
    candidates.append(("global", "/etc/pip.conf"))
    if not (env_file and os.path.exists(env_file)):
        xdg_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        candidates.append(("user", os.path.join(home, ".pip", "pip.conf")))
        candidates.append(("user", os.path.join(xdg_home, "pip", "pip.conf")))
    candidates.append(("site", os.path.join(sys.prefix, "pip.conf")))
    found = []
    seen = set()
    for kind, path in candidates:
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        try:
            text = read_head(path, MAX_CONFIG_TEXT)[0].decode("utf-8", "replace")
        except OSError as exc:
            error("cannot read pip config %s: %s" % (path, exc.strerror or exc))
            continue
        found.append({"path": path, "kind": kind, "text": text})
    return found
