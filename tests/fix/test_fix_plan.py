"""The plan and its refusals, with a FakeInstaller that records the dry-run calls (no venvs needed)."""

from pathlib import Path
from types import SimpleNamespace

from sparkdoctor.fix.definitions import load_all
from sparkdoctor.fix.interface import Installer, Resolution
from sparkdoctor.fix.inventory import Dist, Inventory
from sparkdoctor.fix.plan import FixOptions, build_plan

DATA = Path(__file__).parent / "data"


class FakeInstaller(Installer):
    name = "fake"

    def __init__(self, resolution: dict[str, str]):
        self.resolution, self.calls = resolution, []

    def describe(self) -> str:
        return "fake"

    def dry_run(self, requirements, **kw):
        constraints = [Path(c).read_text().split() for c in kw.get("constraints") or []]
        self.calls.append((list(requirements), constraints, kw.get("ignore_installed", False)))
        return Resolution(installs=dict(self.resolution))

    def install(self, *a, **kw):
        raise AssertionError("a plan never installs")

    uninstall = download = install


def inventory(*dists: Dist, venv: bool = True, writable: bool = True) -> Inventory:
    return Inventory("/v/bin/python", venv, True, writable, "/v/lib/site-packages", "3.11", {d.key: d for d in dists})


def finding(ident: str, fix: str, probe: str | None = None):
    return SimpleNamespace(id=ident, fix=fix, verified_by={"probe": probe} if probe else None, component="test")


def facts(*pins: str):
    return SimpleNamespace(constraints=[{"name": p, "file": "/nowhere/c.txt"} for p in pins])


CUTE = ["nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13"]


def collision_inventory(**kw) -> Inventory:
    return inventory(
        *(Dist(n, "4.5.0", "/v/lib/site-packages") for n in CUTE),
        Dist("flashinfer-python", "0.6.11", "/v/lib/site-packages", requires=["nvidia-cutlass-dsl>=4.5.0", "torch; extra == 'x'"]),
        Dist("numpy", "2.1.0", "/v/lib/site-packages"),
        Dist("torch", "2.12.0a0+nv26.05", "/v/lib/site-packages"),
        **kw,
    )


def test_collision_plan_is_one_clean_family_reinstall_that_obeys_dependents():
    inst = FakeInstaller({n: "4.5.0" for n in CUTE} | {"numpy": "2.1.0"})
    plan = build_plan([finding("cutedsl-wheel-collision", "cutlass-dsl-cu13-clean-reinstall", "cutedsl-nvfp4-mma")], load_all(),
                      collision_inventory(), inst, facts(), FixOptions())
    assert [s.op for s in plan.steps] == ["uninstall", "install", "restore"]
    assert plan.steps[0].names == sorted(CUTE)
    assert plan.steps[1].requirements == ["nvidia-cutlass-dsl[cu13]==4.5.0"]
    assert plan.steps[2].requirements == ["nvidia-cutlass-dsl-libs-cu13==4.5.0"], "libs-cu13 last: its bytes win the shared paths"
    (reqs, constraints, ignore_installed), = inst.calls
    assert ignore_installed and "nvidia-cutlass-dsl>=4.5.0" in constraints[0] and "numpy==2.1.0" in constraints[0]
    assert not any(c.startswith("torch") for c in constraints[0]), "a vendor build is never pinned into a registry resolution"
    assert plan.changes["nvidia-cutlass-dsl-libs-cu13"] == ["4.5.0", "4.5.0"] and "numpy" not in plan.changes
    assert plan.refusals == [] and plan.probes_after == ["cutedsl-nvfp4-mma"]


def test_a_system_interpreter_and_an_unwritable_target_are_refused():
    inst = FakeInstaller({n: "4.5.0" for n in CUTE})
    args = ([finding("c", "cutlass-dsl-cu13-clean-reinstall")], load_all())
    plan = build_plan(*args, collision_inventory(), inst, facts(), FixOptions())
    assert plan.refusals == []
    plan = build_plan(*args, inventory(*(Dist(n, "4.5.0", "/usr/lib") for n in CUTE), venv=False, writable=False), inst, facts(), FixOptions())
    assert any("system interpreter" in r and "--system" in r for r in plan.refusals)
    assert any("not writable" in r for r in plan.refusals)
    plan = build_plan(*args, inventory(*(Dist(n, "4.5.0", "/usr/lib") for n in CUTE), venv=False), inst, facts(), FixOptions(system=True))
    assert plan.refusals == []


def test_a_read_only_local_venv_is_not_told_to_recreate_a_container():
    """`fix --python VENV` on a read-only file system said "...or fix the image it comes from and recreate the
    container": a container's remedy for a local venv. The remedy fits the target kind."""
    from dataclasses import replace

    inst = FakeInstaller({n: "4.5.0" for n in CUTE})
    plan = build_plan([finding("c", "cutlass-dsl-cu13-clean-reinstall")], load_all(), replace(collision_inventory(), read_only=True),
                      inst, facts(), FixOptions())
    [refusal] = [r for r in plan.refusals if "read-only file system" in r]
    assert "container" not in refusal and "remount that file system read-write" in refusal and "venv you own" in refusal, refusal
    from sparkdoctor.fix.plan import read_only_remedy

    assert "recreate the container" in read_only_remedy(local=False) and "container" not in read_only_remedy(local=True)


def test_replacing_a_vendor_build_or_a_local_wheel_is_refused_unless_allowed():
    vendor = inventory(Dist("nvidia-cutlass-dsl", "4.5.0+nv", "/v"), Dist("nvidia-cutlass-dsl-libs-base", "4.5.0", "/v",
                       direct_url={"url": "file:///wheels/base.whl", "archive_info": {}}))
    inst = FakeInstaller({"nvidia-cutlass-dsl": "4.5.2", "nvidia-cutlass-dsl-libs-base": "4.5.2"})
    plan = build_plan([finding("c", "cutlass-dsl-cu13-upgrade")], load_all(), vendor, inst, facts(), FixOptions())
    assert any("4.5.0+nv came from local build (+nv)" in r and "--allow-replace nvidia-cutlass-dsl" in r for r in plan.refusals)
    assert any("direct file:///wheels/base.whl" in r for r in plan.refusals)
    plan = build_plan([finding("c", "cutlass-dsl-cu13-upgrade")], load_all(), vendor, inst, facts(),
                      FixOptions(allow_replace={"nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base"}))
    assert plan.refusals == []


def test_downgrading_a_pinned_package_is_refused_unless_allowed():
    inv = inventory(Dist("six", "1.17.0", "/v"))
    inst = FakeInstaller({"six": "1.16.0"})
    defs = load_all(DATA / "fixes")
    defs["six-upgrade"].actions[0].fields["requirements"] = ["six==1.16.0"]
    plan = build_plan([finding("s", "six-upgrade")], defs, inv, inst, facts("six"), FixOptions())
    assert any("pinned" in r and "1.17.0 -> 1.16.0" in r and "--allow-downgrade six" in r for r in plan.refusals)
    assert build_plan([finding("s", "six-upgrade")], defs, inv, inst, facts(), FixOptions()).refusals == []
    assert build_plan([finding("s", "six-upgrade")], defs, inv, inst, facts("six"), FixOptions(allow_downgrade={"six"})).refusals == []


def test_restoring_files_of_a_non_registry_dist_is_refused_with_no_way_round():
    edited = [{"path": "vllm/x.py", "problem": "modified"}]
    inv = inventory(Dist("vllm", "0.20.1+nv26.05", "/v", mismatched=edited))
    plan = build_plan([finding("vllm-hand-modified", "vllm-restore-files")], load_all(), inv, FakeInstaller({}), facts(),
                      FixOptions(allow_replace={"vllm"}))
    assert plan.steps == [] and any("cannot be restored from the registry" in r for r in plan.refusals)
    inv = inventory(Dist("vllm", "0.20.1", "/v", mismatched=edited))
    plan = build_plan([finding("vllm-hand-modified", "vllm-restore-files")], load_all(), inv, FakeInstaller({"vllm": "0.20.1"}), facts(), FixOptions())
    assert [(s.op, s.requirements) for s in plan.steps] == [("restore", ["vllm==0.20.1"])] and plan.refusals == []


def test_env_fix_without_an_env_file_says_where_to_act(tmp_path):
    plan = build_plan([finding("e", "env-drop-vllm-nvfp4-gemm-backend")], load_all(), inventory(), FakeInstaller({}), facts(), FixOptions())
    assert plan.steps == [] and "--env-file" in plan.notes[0]
    env = tmp_path / "vllm.env"
    env.write_text("A=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\n")
    plan = build_plan([finding("e", "env-drop-vllm-nvfp4-gemm-backend")], load_all(), inventory(), FakeInstaller({}), facts(), FixOptions(env_file=env))
    (step,) = plan.steps
    assert step.op == "edit" and step.diff == ["-VLLM_NVFP4_GEMM_BACKEND=marlin"] and step.new_text == "A=1\n"
    assert env.read_text() == "A=1\nVLLM_NVFP4_GEMM_BACKEND=marlin\n", "a plan changes nothing"


def test_recipe_flag_actions_plan_an_edit_of_the_recipe_file(tmp_path):
    from sparkdoctor.fix.definitions import load_file

    fix = tmp_path / "drop-eager.toml"
    fix.write_text('schema = 1\nid = "drop-eager"\ntitle = "t"\nsummary = "s"\n'
                   '[[action]]\nkind = "drop-flag"\nflag = "--enforce-eager"\n'
                   '[[action]]\nkind = "add-flag"\nflag = "--linear-backend"\nvalue = "flashinfer_b12x"\n')
    recipe = tmp_path / "serve.toml"
    recipe.write_text('command = ["vllm", "serve", "m", "--enforce-eager"]\nenv = { A = "1" }\n')
    defs = {"drop-eager": load_file(fix)}
    plan = build_plan([finding("f", "drop-eager")], defs, inventory(), FakeInstaller({}), facts(), FixOptions())
    assert plan.steps == [] and "--recipe FILE" in plan.notes[0]
    plan = build_plan([finding("f", "drop-eager")], defs, inventory(), FakeInstaller({}), facts(), FixOptions(recipe=recipe))
    (step,) = plan.steps
    assert step.kind == "add-flag" and step.path == str(recipe)
    assert step.new_text == 'command = ["vllm", "serve", "m", "--linear-backend", "flashinfer_b12x"]\nenv = { A = "1" }\n'
    assert step.diff == ['-command = ["vllm", "serve", "m", "--enforce-eager"]', '+command = ["vllm", "serve", "m", "--linear-backend", "flashinfer_b12x"]']


def test_a_constraints_file_that_is_a_fifo_is_refused_as_check_refuses_it(tmp_path):
    """`check -c FIFO` was one line, exit 2; `fix --constraints FIFO` planned on, the file silently unread."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "pins"
    os.mkfifo(fifo)
    for verb in ("fix", "check"):
        done = subprocess.run([sys.executable, "-m", "sparkdoctor", verb, "--python", str(tmp_path / "nonexistent"),
                               "--constraints", str(fifo)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "--constraints" in done.stderr and "not a regular file" in done.stderr, done.stderr


def test_the_files_missing_of_a_dist_the_plan_reinstalls_are_expected_gone_not_left_to_the_user():
    """A cutlass-dsl venv with a family at two versions and files of two wheels deleted: the plan reinstalled the whole
    family (and the apply then said `Findings gone: ..., files-missing-nvidia-cutlass-dsl-libs-base`), yet the plan
    listed each files-missing finding as `Not fixed by sparkdoctor: ... (error): reinstall it ...` by hand."""
    inst = FakeInstaller({n: "4.5.0" for n in CUTE} | {"numpy": "2.1.0"})
    missing = SimpleNamespace(id="files-missing-nvidia-cutlass-dsl-libs-base", fix=None, verified_by=None,
                              component="nvidia-cutlass-dsl-libs-base")
    other = SimpleNamespace(id="files-missing-triton", fix=None, verified_by=None, component="triton")
    plan = build_plan([finding("cutedsl-wheel-collision", "cutlass-dsl-cu13-clean-reinstall"), missing, other], load_all(),
                      collision_inventory(), inst, facts(), FixOptions())
    assert plan.checks_after == ["cutedsl-wheel-collision", "files-missing-nvidia-cutlass-dsl-libs-base"]
