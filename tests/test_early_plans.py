"""cuDNN plans built from a command's start (emopipe.model.early_plans): the recipes, the plan folder's lock and who
waits for it, and the command line's part. The builds themselves need a GPU (the last tests here, and s29a)."""

from __future__ import annotations

import ast
import json
import threading
from dataclasses import replace

import pytest
import torch

from emopipe.cli import run as cli_run
from emopipe.config import RunConfig
from emopipe.model import cudnn_epilogue, cudnn_plans, early_plans
from emopipe.model.cudnn_plans import ConvSpec, TensorSpec
from emopipe.model.places import cache_root
from tests.test_cudnn_epilogue import _block_operands, _block_spec, _FakeGraph, fake_frontend  # noqa: F401

HALF = TensorSpec((32, 24, 64, 64), (98304, 1, 1536, 24), "half")


def _recipe(signature: str = "('conv2d', (1, 1))") -> early_plans.Recipe:
    weight = TensorSpec((24, 1, 3, 3), (9, 9, 3, 1), "half")
    return early_plans.Recipe(signature, ConvSpec(HALF, weight, HALF, (1, 1), (1, 1)))


@pytest.mark.parametrize(("options", "keys"), [
    ({}, ["emonet b64 half", "blazeface_back b32 half"]),
    ({"precision": "bf16", "batch_size": 1}, ["emonet b1 bfloat16", "blazeface_back b32 bfloat16"]),
    ({"epilogue": False}, ["blazeface_back b32 half"]),
    ({"precision": "fp32"}, []),
])
def test_a_configuration_names_the_recipes_it_needs(options, keys):
    given = {"batch_size": 64, "precision": "fp16", "detector": "blazeface_back", "detect_batch": 32, **options}
    assert early_plans.recipe_keys(**given) == keys


def test_recipes_are_kept_and_read_back_and_a_bad_file_gives_none(tmp_path):
    weight = TensorSpec((24, 24, 1, 1), (24, 1, 24, 24), "half")
    bias = TensorSpec((1, 24, 1, 1), (24, 1, 1, 1), "half")
    with_epilogue = early_plans.Recipe("d", ConvSpec(HALF, weight, HALF, (1, 1), (0, 0), bias, HALF, True))
    kept = {"emonet b64 half": [_recipe("a"), _recipe("b")], "blazeface b1 half": [_recipe("c"), with_epilogue]}
    early_plans.save_recipes(kept, tmp_path / "r.json")
    assert early_plans.load_recipes(tmp_path / "r.json") == {key: tuple(value) for key, value in kept.items()}
    (tmp_path / "bad.json").write_text('{"recipes": {"x": [{"signature": "s"}]}}')
    assert early_plans.load_recipes(tmp_path / "bad.json") == {}
    assert early_plans.load_recipes(tmp_path / "missing.json") == {}


def test_a_recipes_plan_file_is_the_one_the_warm_up_names_for_the_same_tensors(fake_frontend, tmp_path):  # noqa: F811
    """The early build names files from a recipe's text; the warm-up from its tensors: the same file."""
    cudnn_epilogue.use_plan_cache(tmp_path)
    x = torch.zeros(2, 8, 6, 6, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    signature = ("conv2d", (2, 2), (1, 1), cudnn_epilogue._signature(x))
    environment = cudnn_epilogue._environment(x.device)
    recipe = early_plans.Recipe(repr(signature), _recipe().spec)
    wanted = early_plans.wanted_plans(tmp_path, environment, ["k"], {"k": (recipe,)})
    assert list(wanted) == [cudnn_epilogue._plan_path(signature, x.device)]
    assert list(wanted.values()) == [recipe.spec]


def test_the_kept_recipes_describe_the_tensors_their_file_names_are_made_from():
    """Each kept recipe's text (its signature as the warm-up writes it) and its graph say the same shapes."""
    recipes = early_plans.load_recipes()
    assert {"emonet b64 half", "blazeface_back b32 half"} <= set(recipes)
    for key, kept in recipes.items():
        assert kept, key
        assert len({recipe.signature for recipe in kept}) == len(kept)  # each plan once
        batch = int(key.split()[1][1:])
        for recipe in kept:
            signature = ast.literal_eval(recipe.signature.replace("torch.float16", "'half'")
                                         .replace("torch.bfloat16", "'bfloat16'").replace("torch.float32", "'float'"))
            tensors = [part for part in signature if isinstance(part, tuple) and len(part) == 3
                       and isinstance(part[0], tuple)]
            assert (tensors[0][0], tensors[0][1], tensors[0][2]) == (recipe.spec.x.dims, recipe.spec.x.strides,
                                                                     recipe.spec.x.dtype), (key, recipe.signature)
            assert recipe.spec.x.dims[0] == batch and recipe.spec.x.dtype == key.split()[2]


def test_the_lock_is_one_builds_and_whoever_finds_a_plan_missing_waits_for_it(tmp_path):
    folder = tmp_path / "cudnn"
    assert not cudnn_plans.early_build_underway(folder)  # (no lock file: never begun here)
    assert cudnn_plans.wait_for_early_build(folder) is False
    lock = cudnn_plans.lock_early_build(folder)
    assert lock is not None and cudnn_plans.lock_early_build(folder) is None  # a second build is not begun
    assert cudnn_plans.early_build_underway(folder)
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(cudnn_plans.wait_for_early_build(folder)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not waited  # (held: it waits, however fast this machine is)
    import os

    os.close(lock)  # the build ends
    waiter.join(60)
    assert waited == [True] and not cudnn_plans.early_build_underway(folder)
    assert cudnn_plans.wait_for_early_build(folder) is False  # (nothing under way: no wait)


def test_a_wait_for_a_build_that_does_not_end_gives_up(tmp_path):
    lock = cudnn_plans.lock_early_build(tmp_path)
    assert lock is not None
    assert cudnn_plans.wait_for_early_build(tmp_path, timeout=0.05) is True  # waited, then went on
    import os

    os.close(lock)


def test_a_plan_being_built_from_the_start_is_read_back_not_built_again(fake_frontend, tmp_path):  # noqa: F811
    """Outside a pass that finds plans: the warm-up waits for the early build and reads what it stored."""
    cudnn_epilogue.use_plan_cache(tmp_path)
    signature, x, w, residual, out, affine, following = _block_operands()
    spec = _block_spec(x, w, residual, out, affine, following)
    path = cudnn_epilogue._plan_path(signature, x.device)
    assert path is not None
    lock = cudnn_plans.lock_early_build(tmp_path)
    assert lock is not None
    plans: list[object] = []
    asking = threading.Thread(target=lambda: plans.append(cudnn_epilogue._plan(
        signature, x.device, cudnn_plans.epilogue_uids(True, True), spec)))
    asking.start()
    asking.join(0.3)
    assert asking.is_alive()  # waiting for the build under way
    cudnn_plans.write(cudnn_plans.build(None, spec), path)  # what the early build stores
    builds = len(_FakeGraph.builds)
    import os

    os.close(lock)
    asking.join(60)
    assert len(plans) == 1 and len(_FakeGraph.builds) == builds  # read back: not built a second time
    assert plans[0].graph.loaded  # type: ignore[attr-defined]


def test_a_pass_leaves_the_plans_being_built_from_the_start_to_that_build(tmp_path):
    """Within a pass: builder processes get only what the early build did not store once it ended."""
    lock = cudnn_plans.lock_early_build(tmp_path)
    assert lock is not None
    builders = cudnn_plans.PlanBuilders(0, 2)
    stored, left = tmp_path / "a.plan", tmp_path / "b.plan"
    builders.add(stored, _recipe().spec)
    builders.add(left, _recipe().spec)
    assert list(builders.awaited) == [stored, left] and not builders._builders  # no builder started meanwhile
    stored.write_bytes(b"PLAN")  # the early build stores one and ends
    import os

    os.close(lock)
    made = builders.finish()  # (the one left goes to a builder process; on a machine without a GPU it builds none)
    assert len(builders._builders) == 1 and not builders.awaited
    assert made == 1 + left.exists()


def test_the_early_build_holds_the_lock_while_it_lives_and_is_not_begun_twice(tmp_path, monkeypatch):
    recipes = tmp_path / "recipes.json"
    early_plans.save_recipes({"emonet b64 half": [_recipe()]}, recipes)
    early_plans.load_recipes.cache_clear()
    early_plans._kept_configurations.cache_clear()
    folder = tmp_path / "cache" / "cudnn"
    monkeypatch.setattr(early_plans, "frontend_installed", lambda: False)
    assert not early_plans.start(0, folder, ["emonet b64 half"], recipes)  # nothing to build with
    monkeypatch.setattr(early_plans, "frontend_installed", lambda: True)  # (the process finds out for itself)
    assert not early_plans.start(0, folder, ["sfd b8 half"], recipes)  # no recipe for it: nothing to begin
    monkeypatch.setenv(early_plans.OFF_VARIABLE, "0")
    assert not early_plans.start(0, folder, ["emonet b64 half"], recipes)  # turned off
    monkeypatch.delenv(early_plans.OFF_VARIABLE)
    held = cudnn_plans.lock_early_build(folder)
    assert held is not None and not early_plans.start(0, folder, ["emonet b64 half"], recipes)  # one under way
    import os

    os.close(held)
    assert early_plans.start(0, folder, ["emonet b64 half"], recipes)
    process = early_plans._builds[-1]
    status = process.wait(120)
    assert not cudnn_plans.early_build_underway(folder)  # the lock went with the process
    if not torch.cuda.is_available() or not cudnn_epilogue.installed():
        assert status == 1 and not list(folder.glob("*.plan"))  # no GPU or frontend: nothing built or to wait for


@pytest.mark.parametrize(("options", "keys"), [
    ({"detector": "blazeface_back"}, ["emonet b64 half", "blazeface_back b32 half"]),
    ({}, ["emonet b64 half", "sfd b8 half"]),
    ({"source": "rtsp://127.0.0.1:8554/cam"}, ["emonet b1 half", "blazeface b1 half"]),
    ({"source": None, "sources": ("a.mp4", "b.mp4"), "no_cudnn_epilogue": True}, ["sfd b8 half"]),
])
def test_the_command_begins_the_build_for_its_configuration_before_pytorch(monkeypatch, tmp_path, options, keys):
    begun: list[tuple] = []
    monkeypatch.setattr(early_plans, "start", lambda *args: begun.append(args) or True)
    config = replace(RunConfig(source="clip.mp4", device="cuda:1", models_dir=str(tmp_path)), **options)
    cli_run.build_plans_ahead(config)
    assert begun == [(1, cache_root(str(tmp_path)) / "cudnn", keys)]


@pytest.mark.parametrize("options", [{"device": "cpu"}, {"backend": "onnxruntime"}, {"compile": "default"},
                                     {"source": None, "sources": ("rtsp://a/1", "rtsp://a/2")}])
def test_no_build_is_begun_where_the_run_uses_no_plans_of_ours(monkeypatch, options):
    begun: list[tuple] = []
    monkeypatch.setattr(early_plans, "start", lambda *args: begun.append(args) or True)
    cli_run.build_plans_ahead(replace(RunConfig(source="clip.mp4", device="cuda"), **options))
    assert begun == []


# -- on a GPU ------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available() or not cudnn_epilogue.installed(),
                         reason="needs a CUDA GPU and nvidia-cudnn-frontend")


@gpu
def test_the_kept_recipes_are_what_the_default_runs_first_passes_ask_for(tmp_path, shared_dir, checkpoints,
                                                                         monkeypatch):
    """A recipe gone stale would build plans nobody reads (benchmarks/record_plan_recipes.py writes them again)."""
    from emopipe.pipeline.models import plan_recipes

    monkeypatch.setattr(cudnn_epilogue, "_cache_dir", None)  # (the engine points it at its plan folder: put back)

    models = tmp_path / "models"
    models.mkdir()
    for name in ("blazefaceback.pth", "anchorsback.npy"):
        (models / name).write_bytes((shared_dir / "models" / "blazeface" / name).read_bytes())
    config = RunConfig(source="clip.mp4", weights=str(checkpoints[8]), models_dir=str(models),
                       detector="blazeface_back").resolved("cuda")
    found = plan_recipes(config)
    kept = early_plans.load_recipes()
    assert {key: set(value) for key, value in found.items()} == {key: set(kept[key]) for key in found}


@gpu
def test_the_early_build_stores_the_plans_the_warm_up_reads(tmp_path):
    """Named from the driver's GPU name, as PyTorch's: the files a warm-up of this GPU looks for."""
    folder = tmp_path / "cudnn"
    keys = ["emonet b64 half", "blazeface_back b32 half"]
    assert early_plans.start(0, folder, keys)
    assert early_plans._builds[-1].wait(300) == 0
    props = torch.cuda.get_device_properties(0)
    environment = cudnn_plans.environment(props.name, props.major, props.minor)
    wanted = early_plans.wanted_plans(folder, environment, keys, early_plans.load_recipes())
    assert wanted and all(path.exists() for path in wanted)
    assert sorted(folder.glob("*.plan")) == sorted(wanted)
    assert json.loads(early_plans.RECIPES.read_text())["recipes"]  # (the kept file is what it read)
