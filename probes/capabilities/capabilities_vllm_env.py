"""Which VLLM_* variables the installed vLLM knows, from the table its envs.py defines (built by
capabilities_vllm on a cold run and cached). Kept apart from the rules so a warm run answers for
the current environment without importing ast.
"""

from capabilities_files import cap

WATCHED_ENV = ("VLLM_NVFP4_GEMM_BACKEND", "VLLM_USE_FLASHINFER_MOE_FP4", "VLLM_FLASHINFER_MOE_BACKEND", "VLLM_TEST_FORCE_FP8_MARLIN", "VLLM_MARLIN_INPUT_DTYPE")
V_ENVS = "vllm/envs.py"


def vllm_env_defaults(table):
    """env_default.NAME for every variable envs.py defines: what the release uses when it is unset
    (a string; False: no default, unset stays unset; None: not a literal). Conditions on an env
    var's value read it when the variable is not set, so entries never copy a release's default."""
    out = {}
    for name, row in sorted((table or {}).items()):
        if row[0] == "removed":  # not read any more: it has no default, and setting it stops vLLM
            continue
        default = row[3] if len(row) > 3 else None
        if default is None:
            out["env_default." + name] = cap(None, "%s:%d: the default is not a literal" % (V_ENVS, row[1]))
        elif default is False:
            out["env_default." + name] = cap(False, "%s:%d: no default (unset stays unset)" % (V_ENVS, row[1]))
        else:
            out["env_default." + name] = cap(default, "%s:%d: default %r" % (V_ENVS, row[1], default))
    return out


def vllm_env_caps(table, names):
    out = {}
    for name in names:
        key = "vllm.env." + name
        if table is None:
            out[key] = cap(None, "%s: no environment_variables dict recognised" % V_ENVS)
            continue
        row = table.get(name)
        if row is None:
            out[key] = cap("unknown", "%s: not in environment_variables" % V_ENVS)
        elif row[0] == "removed":
            out[key] = cap("removed", "%s:%d removed_environment_variables: %s" % (V_ENVS, row[1], row[2]))
        elif row[0] == "deprecated":
            out[key] = cap("deprecated", "%s:%d deprecated_env(%s)" % (V_ENVS, row[1], row[2]))
        else:
            out[key] = cap("known", "%s:%d" % (V_ENVS, row[1]))
    return out
