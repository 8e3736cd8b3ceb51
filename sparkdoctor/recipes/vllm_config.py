"""`vllm serve --config FILE.yaml`: the options a recipe's command takes from that file, as vLLM's parser reads them.

vLLM 0.32's FlexibleArgumentParser (vllm/utils/argparse_utils.py: `parse_args`, `_pull_args_from_config`,
`load_config_file`):
  * only the argument `--config` followed by a path loads a file (`--config=FILE` is an option's value that nothing
    reads); `--config` twice or with no path after it stops the server;
  * the file must be named .yaml or .yml and hold a YAML mapping (`yaml.safe_load`), whose keys are the options' long
    names without `--` (`max-model-len` or `max_model_len`);
  * each key becomes `--KEY VALUE`; true is `--KEY`, false `--no-KEY` (where the option has one), a list `--KEY` and
    each item, a mapping `--KEY` and its JSON;
  * these are put after `serve` and the model and before every other argument, so a flag on the command line wins over
    the file (argparse keeps the last), and the file over vLLM's defaults.

vLLM opens a relative path from the directory it is started in; sparkdoctor reads it from the recipe's folder, where a
recipe's runner is started. A container recipe's path names a file inside its container (an absolute one of its image,
a relative one of its working folder: the container launch mounts the model's folder, not the recipe's): it is never
read from this machine. Nothing here runs vLLM or imports it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from sparkdoctor.inputs import kernel_file
from sparkdoctor.recipes.model import Recipe, RecipeError, flag_value
from sparkdoctor.recipes.yamlsafe import read_yaml

MAX_BYTES = 1024 * 1024  # a config file holds a few dozen options


@dataclass(frozen=True)
class ServeConfig:
    """The `--config` file of a recipe's command.

    written: the path as the command gives it; path: where it was read.
    args: its options as vLLM turns them into arguments (empty when it could not be read).
    problem: why it was not read (one line), else None. fatal: whether vLLM itself would refuse to start because of
        it (a file a container recipe names may be inside the image: not on this machine, but no reason to refuse).
    """

    written: str
    path: Path | None
    args: tuple[str, ...] = ()
    problem: str | None = None
    fatal: bool = False


def serve_config(recipe: Recipe) -> ServeConfig | None:
    """The recipe command's `--config` file, read; None when the command passes none."""
    argv = [str(a) for a in recipe.argv]
    if "--config" not in argv:
        return None
    at = argv.index("--config")
    if argv.count("--config") > 1:
        return ServeConfig("", None, problem="the command gives --config more than once: vLLM refuses to start "
                           "(\"More than one config file specified!\")", fatal=True)
    if at + 1 >= len(argv):
        return ServeConfig("", None, problem="the command ends with --config and no file: vLLM refuses to start",
                           fatal=True)
    written = argv[at + 1]
    path = Path(written)
    if not path.is_absolute():
        path = Path(recipe.source_path).parent / path
    if written.split(".")[-1] not in ("yaml", "yml"):
        return ServeConfig(written, path, problem=f"--config {written}: vLLM reads only a .yaml or .yml config file and "
                           "refuses to start with another", fatal=True)
    if recipe.container:
        # the server opens it inside the container: an absolute path from its image (a file of that name here is another
        # file, or a secret), a relative one from its working folder, where no recipe folder is mounted
        # (serve/container_launch.py mounts the model's folder only)
        where = "its image" if Path(written).is_absolute() else "its working folder (the recipe's folder is not mounted there)"
        return ServeConfig(written, path, problem=f"--config {written}: read inside the container {recipe.container}, from "
                           f"{where}, not from this machine: its options are not judged")
    try:
        missing = not path.exists() and not path.is_symlink()
    except (OSError, ValueError) as exc:  # a name too long for the file system
        return ServeConfig(written[:200], path, problem=f"--config {written[:200]}: cannot read: "
                           f"{getattr(exc, 'strerror', None) or exc.__class__.__name__}: vLLM would not start", fatal=True)
    if missing:
        where = "" if Path(written).is_absolute() else f" (read from the recipe's folder, {path.parent})"
        return ServeConfig(written, path, problem=f"--config {written}: no such file{where}: vLLM would not start", fatal=True)
    if (real := kernel_file(path)) is not None:  # /proc/kmsg: a "regular file" whose read waits for the kernel
        return ServeConfig(written, path, problem=f"--config {written}: {real} is a kernel file, not a config file: vLLM "
                           "would not start", fatal=True)
    try:
        doc, _ = read_yaml(path, MAX_BYTES)
    except RecipeError as exc:
        return ServeConfig(written, path, problem=f"--config {written}: {exc}", fatal=True)
    if not isinstance(doc, dict):
        kind = "empty" if doc is None else f"a {type(doc).__name__}, not a mapping of options"
        return ServeConfig(written, path, problem=f"--config {written}: the file is {kind}: vLLM fails reading it and "
                           "does not start", fatal=True)
    args: list[str] = []
    for key, value in doc.items():
        if not isinstance(key, str) or not key:
            return ServeConfig(written, path, problem=f"--config {written}: the key {key!r} is not an option's name: "
                               "vLLM fails reading the file and does not start", fatal=True)
        args += _as_args(key, value)
    return ServeConfig(written, path, tuple(args))


def launched_argv(recipe: Recipe) -> list[str]:
    """The recipe's command as sparkdoctor starts it on this machine (in a run folder of its own): a relative
    `--config FILE` made absolute from the recipe's folder, where recipe check, audit and the memory preflight read it
    (started as written, the server looked for it in the empty run folder and did not start). A file not there is
    left as written: the server says so. So is the model: a folder named relative to the working folder (or `~`),
    where they read it, goes by its absolute path (as written, vLLM took it for a hub id in the run folder)."""
    argv = [str(a) for a in recipe.argv]
    folder = _local_folder(recipe.model)
    if folder is not None and recipe.model in argv:
        argv = [folder if a == recipe.model else a for a in argv]
        # a vLLM command (its options have a place): clients send the name as written; vLLM would serve the new path
        if recipe.served_model_name == recipe.model and flag_value(argv, "--served-model-name") is None and \
                _options_start(argv) is not None:
            argv += ["--served-model-name", recipe.model]
    if argv.count("--config") != 1 or argv.index("--config") + 1 >= len(argv):
        return argv
    at = argv.index("--config") + 1
    path = Path(recipe.source_path).parent / argv[at]
    try:
        there = not Path(argv[at]).is_absolute() and path.is_file()
    except (OSError, ValueError):  # a name too long for the file system
        there = False
    return argv[:at] + [os.path.abspath(path)] + argv[at + 1:] if there else argv


def _local_folder(model: str | None) -> str | None:
    """The absolute path of a model named by a relative path or `~` that is a folder here; None otherwise (an
    absolute path, a hub id, nothing there)."""
    if not model or os.path.isabs(model):
        return None
    try:
        path = Path(model).expanduser()
        return os.path.abspath(path) if path.is_dir() else None
    except (OSError, ValueError, RuntimeError):  # a name too long for the file system; `~user` with no such user
        return None


def _as_args(key: str, value: object) -> list[str]:
    """One option of the file as vLLM's load_config_file writes it on the command line."""
    if isinstance(value, bool):
        return [f"--{key}" if value else f"--no-{key}"]
    if isinstance(value, list):
        return [f"--{key}", *(str(item) for item in value)] if value else []
    if isinstance(value, dict):
        return [f"--{key}", json.dumps(value, default=str)]
    return [f"--{key}", str(value)]


def served_argv(recipe: Recipe, config: ServeConfig | None = None) -> list[str]:
    """The recipe's command as vLLM's parser reads it: the `--config` file's options put in place of `--config FILE`,
    after `serve` and the model (or after the `vllm.entrypoints...` module), before the command line's own flags.
    The command unchanged when it passes no config file or the file could not be read."""
    argv = [str(a) for a in recipe.argv]
    if config is None:
        config = serve_config(recipe)
    if config is None or config.problem is not None:
        return argv
    at = argv.index("--config")
    rest = argv[:at] + argv[at + 2:]
    start = _options_start(rest) or at
    return rest[:start] + list(config.args) + rest[start:]


def _options_start(argv: list[str]) -> int | None:
    """Where vLLM's parser puts a config file's options: after `vllm serve [MODEL]`, or after `-m vllm.entrypoints...`;
    None for a command that is not vLLM's (`.../vllm serve ...` or `python -m vllm.entrypoints...`)."""
    for i, arg in enumerate(argv):
        if Path(arg).name == "vllm" and argv[i + 1:i + 2] == ["serve"]:
            has_model = i + 2 < len(argv) and not argv[i + 2].startswith("-")
            return i + 3 if has_model else i + 2
        if arg.startswith("vllm.entrypoints"):
            return i + 1
    return None
