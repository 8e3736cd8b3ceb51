"""vulture's whitelist (`.venv/bin/vulture`, settings in pyproject.toml [tool.vulture]): names vulture cannot see used.

Reviewed by hand, one group per reason. Regenerate candidates with
`.venv/bin/vulture sparkdoctor --min-confidence 60 --make-whitelist`, and add a name here only with its reason:
dead code is deleted, not listed, and so is code only the tests call.
"""
# ruff: noqa

# File-object protocol: zipfile and tarfile call these on a remote file
_.readable  # unused method (sparkdoctor/released/rangefile.py)
_.seekable  # unused method (sparkdoctor/released/rangefile.py)
_.tell  # unused method (sparkdoctor/released/rangefile.py)
_.seek  # unused method (sparkdoctor/released/rangefile.py)
_.readinto  # unused method (sparkdoctor/released/rangefile.py)

# Words of closed vocabularies and documented exit codes: named once, read as values
DETECTED  # unused variable (sparkdoctor/arch.py)
GIVEN  # unused variable (sparkdoctor/arch.py)
configure  # unused variable (sparkdoctor/vocab.py)
rebench  # unused variable (sparkdoctor/vocab.py)
monitor  # unused variable (sparkdoctor/vocab.py)
reproduced  # unused variable (sparkdoctor/vocab.py)
reported  # unused variable (sparkdoctor/vocab.py)
inconclusive  # unused variable (sparkdoctor/vocab.py)
flipped  # unused variable (sparkdoctor/vocab.py)
EXIT_DIFF_BAD_INPUT  # unused variable (sparkdoctor/exitcodes.py)

# Fields of dataclasses written out whole (asdict, JSON), keys of JSON TypedDicts, and the TarInfo field tarfile reads
vocab  # unused variable (sparkdoctor/audit/modelconfig.py)
first_kind  # unused variable (sparkdoctor/bench/client.py)
_.first_kind  # unused attribute (sparkdoctor/bench/client.py)
per_prompt  # unused variable (sparkdoctor/bench/correctness.py)
per_stream  # unused variable (sparkdoctor/bench/imported.py)
greedy_prefix  # unused variable (sparkdoctor/bench/correctness.py)
mean_abs_dlogprob  # unused variable (sparkdoctor/bench/correctness.py)
decisive  # unused variable (sparkdoctor/bench/correctness.py)
figure  # unused variable (sparkdoctor/ledger/compare.py)
_.mtime  # unused attribute (sparkdoctor/targets/fileops.py)

# sparkrun's plugin loader reads these by name (sparkrun 0.4.2 core/registration.py: every plugin module declares
# SPARKRUN_PLUGIN_API_VERSION)
SPARKRUN_PLUGIN_API_VERSION  # unused variable (sparkdoctor/integrations/sparkrun_plugin.py)

# Fields of the measured-fabric documents, written to JSON through dataclasses.asdict
peak_gbps  # unused variable (sparkdoctor/fleet/toolparse.py)
average_busbw_gbs  # unused variable (sparkdoctor/fleet/toolparse.py)

# rich calls a render hook's process_renderables (rich.console.RenderHook)
process_renderables  # unused method (sparkdoctor/sink.py)

# shlex.shlex reads its whitespace_split setting while it splits (recipes/resolve.py: a shell line's operators)
_.whitespace_split  # unused attribute (sparkdoctor/recipes/resolve.py)

# Fields of the memory documents, written to JSON through dataclasses.asdict (docs/memory.md)
swap_total_bytes  # unused variable (sparkdoctor/memory/have.py)

# typer reads the signature commands/options.command() builds for a verb's command from its options dataclass
_.__signature__  # unused attribute (sparkdoctor/commands/options.py)
# TypedDict keys: read and written by subscript (ceiling["ceiling_tok_s"]) or .get(), which vulture does not count as a use
ceiling_tok_s  # unused variable (sparkdoctor/audit/roofline.py)
batch_ceiling_tok_s  # unused variable (sparkdoctor/audit/roofline.py)
uriBaseId  # unused variable (sparkdoctor/views/sarif.py)
artifactLocation  # unused variable (sparkdoctor/views/sarif.py)
region  # unused variable (sparkdoctor/views/sarif.py)
physicalLocation  # unused variable (sparkdoctor/views/sarif.py)
read_only_fs  # unused variable (sparkdoctor/targets/interface.py)
exact_cc  # unused variable (sparkdoctor/cuda_driver.py)
ms  # unused variable (sparkdoctor/cuda_driver.py)
median_days  # unused variable (sparkdoctor/matrix/consistency.py)
within_7_days  # unused variable (sparkdoctor/matrix/consistency.py)
host_python  # unused variable (sparkdoctor/facts.py)
flashinfer  # unused variable (sparkdoctor/facts.py)
vllm_download_kernels  # unused variable (sparkdoctor/facts.py)
jit_cache_wanted  # unused variable (sparkdoctor/facts.py)
jit_cache  # unused variable (sparkdoctor/facts.py)
# TypedDict keys of the fleet document's fabric.topology, a node's fabric answer and nccl-tests' rows, read and
# written by .get("...") and subscript
switched_subnets  # unused variable (sparkdoctor/fleet/topology.py)
ndev  # unused variable (sparkdoctor/fleet/topology.py)
ipv4  # unused variable (sparkdoctor/fleet/topology.py)
rate_gbps  # unused variable (sparkdoctor/fleet/topology.py)
link_layer  # unused variable (sparkdoctor/fleet/topology.py)
busbw_gbs  # unused variable (sparkdoctor/fleet/toolparse.py)
algbw_gbs  # unused variable (sparkdoctor/fleet/toolparse.py)
cache_config  # unused variable (sparkdoctor/bench/served.py): a TypedDict key, written in a dict literal
# asyncio.wrap_future calls a concurrent Future's set_running_or_notify_cancel before it cancels it (lookup.Lookup)
_.set_running_or_notify_cancel  # unused method (sparkdoctor/lookup.py)

# The kernel probes' references: a probe header (probes/kernels/*.ptx) names them, kernels/gpu_run.py looks them up
fp8_mma_inputs  # unused function (sparkdoctor/fp_reference/probes.py)
fp8_mma_expected  # unused function (sparkdoctor/fp_reference/probes.py)
fp4_mma_inputs  # unused function (sparkdoctor/fp_reference/probes.py)
fp4_mma_expected  # unused function (sparkdoctor/fp_reference/probes.py)
nvfp4_mma_inputs  # unused function (sparkdoctor/fp_reference/probes.py)
nvfp4_mma_expected  # unused function (sparkdoctor/fp_reference/probes.py)
mxf4_mma_inputs  # unused function (sparkdoctor/fp_reference/probes.py)
mxf4_mma_expected  # unused function (sparkdoctor/fp_reference/probes.py)
e2m1_cvt_inputs  # unused function (sparkdoctor/fp_reference/probes.py)
e2m1_cvt_expected  # unused function (sparkdoctor/fp_reference/probes.py)
