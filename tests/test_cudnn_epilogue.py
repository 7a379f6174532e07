"""The ConvBlocks' cuDNN epilogue path (emopipe.cudnn_epilogue): wiring, fallback and when it is on.

cuDNN's fused kernels need a GPU (scripts/kernels_parity.py compares them there). Here the block
wiring is checked on the CPU against the function's documented contract, written in PyTorch: every
convolution's residual slice, next activation and the consumer's prepared input must land where the
published network would put them.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import types
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F

from emopipe.engines import torch_engine as engine
from emopipe.engines.base import EngineOptions
from emopipe.engines.torch_engine import TorchEngine
from emopipe.model import cudnn_epilogue, cudnn_plans
from emopipe.model.emonet import build_emonet
from emopipe.model.fusion import FusedConvBlock, fuse
from tests.support.checkpoints import random_state


def contract(x, weight, residual, out, first, scale=None, shift=None, next_act=None):  # type: ignore[no-untyped-def]
    """What conv_add_slice promises, in plain PyTorch."""
    y = F.conv2d(x, weight, padding=1)
    part = slice(first, first + y.shape[1])
    out[:, part] = y + residual[:, part]
    if next_act is not None:
        buffer, next_scale, next_shift = next_act
        buffer[:, part] = torch.relu(out[:, part] * next_scale[:, part] + next_shift[:, part])
    return torch.relu(y * scale + shift) if scale is not None else None


def _blocks(model: torch.nn.Module) -> int:
    return sum(isinstance(m, FusedConvBlock) for m in model.modules())


def test_blocks_through_the_epilogue_compute_the_published_function(monkeypatch):
    calls: list[int] = []

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(int(kwargs.get("next_act") is not None or (len(args) > 7 and args[7] is not None)))
        return contract(*args, **kwargs)

    monkeypatch.setattr(cudnn_epilogue, "applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv_add_slice", counted)
    reference = build_emonet(random_state(8, seed=4))
    fused = fuse(reference)
    x = torch.rand(2, 3, 256, 256).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        want = reference(x)
        got = fused.to(memory_format=torch.channels_last)(x)
    assert len(calls) == 3 * _blocks(fused)  # every block's three convolutions went through it
    assert sum(calls) > 0  # and blocks with one consumer prepared its input in the same call
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)


def test_a_shape_cudnn_cannot_run_falls_back_to_the_two_pass_path(monkeypatch):
    attempts: list[int] = []

    def unsupported(*args, **kwargs):  # type: ignore[no-untyped-def]
        attempts.append(1)
        raise cudnn_epilogue.Unsupported("No valid engine configs")

    monkeypatch.setattr(cudnn_epilogue, "applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv_add_slice", unsupported)
    reference = build_emonet(random_state(5, seed=5))
    fused = fuse(reference)
    x = torch.rand(1, 3, 256, 256)
    with torch.inference_mode():
        want, got = reference(x), fused(x)
    assert len(attempts) == _blocks(fused)  # tried once per block, then the block ran as before
    torch.testing.assert_close(got.expression, want.expression, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(got.valence, want.valence, atol=2e-5, rtol=1e-4)


def _conv_contract(calls: list[tuple]):  # type: ignore[no-untyped-def]
    """What conv2d promises, in plain PyTorch, each call noted (weight shape, stride, bias?, residual?, relu)."""
    def conv2d(x, weight, stride, padding, bias=None, residual=None, relu=False):  # type: ignore[no-untyped-def]
        calls.append((tuple(weight.shape), tuple(stride), bias is not None, residual is not None, relu))
        y = F.conv2d(x, weight, bias, stride, padding, 1, x.shape[1] // weight.shape[1])
        y = y + residual if residual is not None else y
        return y.relu() if relu else y
    return conv2d


@pytest.mark.parametrize("epilogue", [True, False])
def test_emonets_other_convolutions_go_through_kept_plans_with_the_epilogue(monkeypatch, epilogue):
    """The stem (bias and ReLU as it writes), the blocks' downsampling 1×1 convolutions and the stacks' last
    convolutions (bias and ReLU) ask conv2d for a kept plan where the epilogue is on; the function is the published
    one either way."""
    calls: list[tuple] = []
    monkeypatch.setattr(cudnn_epilogue, "conv_applicable", lambda x, weight: True)
    monkeypatch.setattr(cudnn_epilogue, "conv2d", _conv_contract(calls))
    reference = build_emonet(random_state(8, seed=6))
    fused = fuse(reference, use_cudnn_epilogue=epilogue)
    x = torch.rand(2, 3, 256, 256).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        want = reference(x)
        got = fused.to(memory_format=torch.channels_last)(x)
    for name in ("expression", "valence", "arousal", "heatmap"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=2e-5, rtol=1e-4)
    if not epilogue:
        assert calls == []
        return
    stem, *rest = calls
    assert stem == ((64, 3, 7, 7), (2, 2), True, False, True)
    downsampling = [call for call in rest if not call[4]]
    lasts = [call for call in rest if call[4]]
    assert len(lasts) == len(fused.lasts) == 2 and all(call[0][2:] == (1, 1) and call[2] for call in lasts)
    blocks_that_widen = sum(m.downsample is not None for m in fused.modules() if isinstance(m, FusedConvBlock))
    assert len(downsampling) == blocks_that_widen > 0
    assert all(call[0][2:] == (1, 1) and not call[2] and not call[3] for call in downsampling)


def test_a_convolutions_bias_residual_and_relu_are_bound_as_its_graph_names_them(fake_frontend, tmp_path,
                                                                                   monkeypatch):
    """conv2d with a bias, a residual and a ReLU: one plan whose graph adds the bias, then the residual, then applies
    the ReLU; the bias bound as 1×C×1×1; its file another than the convolution's alone, whose name (and so the
    plans already kept for BlazeFace's depthwise convolutions) is as before."""
    cudnn_epilogue.use_plan_cache(tmp_path)
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    bound: list[tuple[cudnn_epilogue._Plan, dict[int, torch.Tensor]]] = []

    def run(self, tensors, results):  # type: ignore[no-untyped-def]
        bound.append((self, dict(zip(self.uids, tensors + results, strict=True))))

    monkeypatch.setattr(cudnn_epilogue._Plan, "run", run)
    signatures: list[tuple] = []
    process_plan = cudnn_epilogue._process_plan
    monkeypatch.setattr(cudnn_epilogue, "_process_plan",
                        lambda signature, *args: signatures.append(signature) or process_plan(signature, *args))
    cl = torch.channels_last
    x = torch.zeros(2, 8, 6, 6, dtype=torch.float16).contiguous(memory_format=cl)
    w = torch.zeros(4, 8, 1, 1, dtype=torch.float16).contiguous(memory_format=cl)
    bias = torch.arange(4, dtype=torch.float16)
    residual = torch.ones(2, 4, 6, 6, dtype=torch.float16).contiguous(memory_format=cl)
    y = cudnn_epilogue.conv2d(x, w, (1, 1), (0, 0), bias, residual, relu=True)
    assert y.shape == (2, 4, 6, 6) and y.is_contiguous(memory_format=cl)
    plan, tensors = bound[-1]
    names = ["x", "weight", "bias", "residual", "y"]
    assert plan.uids == [plan.graph.uids[name] for name in names]
    assert tensors[plan.graph.uids["bias"]].shape == (1, 4, 1, 1)
    assert tensors[plan.graph.uids["residual"]] is residual and tensors[plan.graph.uids["y"]] is y
    assert plan.graph.dims["bias"] == ([1, 4, 1, 1], [4, 1, 1, 1])
    alone = cudnn_epilogue.conv2d(x, w, (1, 1), (0, 0))
    assert alone.shape == y.shape and len(list(tmp_path.glob("*.plan"))) == 2
    assert signatures[-1] == ("conv2d", (1, 1), (0, 0), cudnn_epilogue._signature(x), cudnn_epilogue._signature(w),
                              cudnn_epilogue._signature(alone))  # as the kept recipes name it
    assert signatures[0][:6] == signatures[-1] and signatures[0][6:] == (
        ("bias", ((1, 4, 1, 1), (4, 1, 1, 1), torch.float16)), ("residual", cudnn_epilogue._signature(residual)),
        "relu")
    with pytest.raises(cudnn_epilogue.Unsupported):  # a residual laid out otherwise: PyTorch's path
        cudnn_epilogue.conv2d(x, w, (1, 1), (0, 0), bias, residual.contiguous(), relu=True)


def test_on_only_for_cuda_half_precision_with_the_frontend_installed(monkeypatch):
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr(cudnn_epilogue, "installed", lambda: True)
    assert EngineOptions().resolved(cuda).cudnn_epilogue  # fp16 on CUDA by default
    assert EngineOptions(precision="bf16").resolved(cuda).cudnn_epilogue
    assert not EngineOptions(precision="fp32").resolved(cuda).cudnn_epilogue
    assert not EngineOptions(cudnn_epilogue=False).resolved(cuda).cudnn_epilogue
    assert not EngineOptions().resolved(cpu).cudnn_epilogue
    monkeypatch.setattr(cudnn_epilogue, "installed", lambda: False)
    assert not EngineOptions().resolved(cuda).cudnn_epilogue  # the report says what runs


def test_not_applicable_to_cpu_tensors():
    x = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    assert not cudnn_epilogue.applicable(x, w)


def _gpu_block(seed: int) -> tuple[torch.Tensor, ...]:
    """A ConvBlock convolution's operands on the GPU: input, weight, residual, next BatchNorm's scale and shift."""
    torch.manual_seed(seed)
    cl = torch.channels_last
    x = torch.rand(2, 32, 16, 16, device="cuda", dtype=torch.half).contiguous(memory_format=cl)
    w = (torch.randn(16, 32, 3, 3, device="cuda") / 20).half().contiguous(memory_format=cl)
    residual = torch.randn(2, 64, 16, 16, device="cuda", dtype=torch.half).contiguous(memory_format=cl)
    scale, shift = torch.rand(1, 16, 1, 1, device="cuda") + 0.5, torch.randn(1, 16, 1, 1, device="cuda")
    return x, w, residual, scale, shift


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused kernels)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
def test_the_cudnn_kernel_keeps_the_contract():
    x, w, residual, scale, shift = _gpu_block(seed=0)
    outs = [torch.zeros_like(residual) for _ in range(2)]
    got = cudnn_epilogue.conv_add_slice(x, w, residual, outs[0], 16, scale, shift)
    want = contract(x.float(), w.float(), residual.float(), outs[1], 16, scale, shift)
    torch.testing.assert_close(outs[0].float(), outs[1].float(), atol=4e-3, rtol=4e-3)
    torch.testing.assert_close(got.float(), want, atol=4e-3, rtol=4e-3)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("flag, expected", [([], True), (["--no-cudnn-epilogue"], False)])
def test_the_cli_switch_reaches_the_engine(flag, expected, monkeypatch, tmp_path, checkpoints):
    from emopipe.cli import run
    from tests.support.synth import moving_face_video

    seen: list[EngineOptions] = []

    def capture(backend, model, options, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(options)
        raise _Stop

    monkeypatch.setattr("emopipe.pipeline.models.create_engine", capture)
    video = moving_face_video(tmp_path / "v.mp4", frames=2).path
    args = run.build_parser().parse_args([str(video), "--weights", str(checkpoints[8]), "--device", "cpu",
                                          "-o", str(tmp_path / "rows.csv"), *flag])
    with pytest.raises(_Stop):
        run.run(args)
    assert seen[0].cudnn_epilogue is expected


def test_a_graph_the_frontend_refuses_is_remembered_as_unsupported(monkeypatch):
    """Any failure to build a shape's plan sends that shape to the two-pass path, once and for all."""
    import sys
    import types

    built: list[int] = []

    def refuse(**kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        raise RuntimeError("cudnnGraphNotSupportedError: No valid engine configs")

    fake = types.SimpleNamespace(pygraph=refuse, data_type=types.SimpleNamespace(HALF=1, BFLOAT16=2, FLOAT=3))
    monkeypatch.setitem(sys.modules, "cudnn", fake)
    monkeypatch.setattr(cudnn_epilogue, "_handle", lambda device: None)
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    x = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    residual = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    for _ in range(2):
        with pytest.raises(cudnn_epilogue.Unsupported, match="No valid engine configs"):
            cudnn_epilogue.conv_add_slice(x, w, residual, torch.empty_like(residual), 4)
    assert built == [1]  # the second call did not try again


def test_a_frontend_that_does_not_load_counts_as_absent(monkeypatch, tmp_path, caplog):
    package = tmp_path / "cudnn"
    package.mkdir()
    (package / "__init__.py").write_text("raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "cudnn", raising=False)
    cudnn_epilogue.installed.cache_clear()
    try:
        assert not cudnn_epilogue.installed()
        assert "does not load" in caplog.text and "libcudnn.so.9" in caplog.text
    finally:
        cudnn_epilogue.installed.cache_clear()


class _FakeTensor:
    """Records the name and UID the graph gives each tensor (the real ones are cuDNN's)."""

    def __init__(self, graph: _FakeGraph) -> None:
        self.graph = graph

    def set_name(self, name: str) -> _FakeTensor:
        self.name = name
        return self

    def set_uid(self, uid: int) -> _FakeTensor:
        self.graph.uids[self.name] = uid
        return self

    def __getattr__(self, attr: str):  # type: ignore[no-untyped-def]  # set_output, set_stride, ...
        return lambda *args, **kwargs: self


class _FakeGraph:
    builds: ClassVar[list[int]] = []  # (reset per test by the fixture)
    strides: ClassVar[list[object]] = []  # each convolution's, as described
    loads: ClassVar[list[bytes]] = []

    def __init__(self, **kwargs: object) -> None:
        self.uids: dict[str, int] = {}
        self.dims: dict[str, tuple[list[int], list[int]]] = {}  # each operand's sizes and strides, by name
        self.loaded = False

    def tensor(self, name: str, dim: list[int], stride: list[int], data_type: object) -> _FakeTensor:
        self.dims[name] = (dim, stride)
        return _FakeTensor(self).set_name(name)

    def conv_fprop(self, **kwargs: object) -> _FakeTensor:
        if "stride" in kwargs:
            _FakeGraph.strides.append(kwargs["stride"])
        return _FakeTensor(self)

    add = relu = bias = scale = conv_fprop

    def build_plans(self) -> None:
        _FakeGraph.builds.append(1)

    validate = build_operation_graph = check_support = lambda self, *args: None
    create_execution_plans = validate

    def get_workspace_size(self) -> int:
        return 64

    def serialize(self) -> list[int]:  # the real frontend returns a list of byte values too
        return list(b"PLAN" + repr(sorted(self.uids.items())).encode())

    def deserialize(self, handle: object, values: list[int]) -> None:
        data = bytes(values)
        if not data.startswith(b"PLAN"):
            raise RuntimeError("[json.exception.parse_error.110] unexpected end of input")
        _FakeGraph.loads.append(data)
        self.loaded = True


@pytest.fixture
def fake_frontend(monkeypatch):  # type: ignore[no-untyped-def]
    import sys
    import types

    fake = types.SimpleNamespace(pygraph=_FakeGraph, data_type=types.SimpleNamespace(HALF=1, BFLOAT16=2, FLOAT=3),
                                 heur_mode=types.SimpleNamespace(A=0, B=1, FALLBACK=2))
    monkeypatch.setitem(sys.modules, "cudnn", fake)
    monkeypatch.setattr(cudnn_epilogue, "_handle", lambda device: None)
    monkeypatch.setattr(cudnn_epilogue, "_environment", lambda device: "H100 sm90 cudnn 91900 frontend 1.16.0")
    monkeypatch.setattr(_FakeGraph, "builds", [])
    monkeypatch.setattr(_FakeGraph, "loads", [])
    yield
    cudnn_epilogue.use_plan_cache(None)


def _block_operands(batch: int = 1) -> tuple:
    cl = torch.channels_last
    x = torch.zeros(batch, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=cl)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    residual = torch.zeros(batch, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=cl)
    affine = (torch.ones(1, 4, 1, 1), torch.zeros(1, 4, 1, 1))
    following = (torch.empty_like(residual)[:, 4:], torch.ones(1, 4, 1, 1), torch.zeros(1, 4, 1, 1))
    signature = ("shapes", batch)  # conv_add_slice derives it from the operands; any stable tuple works here
    return signature, x, w, residual[:, 4:], torch.empty_like(residual)[:, 4:], affine, following


def _block_spec(x, w, residual, out, affine, following) -> cudnn_plans.EpilogueSpec:  # type: ignore[no-untyped-def]
    return cudnn_plans.EpilogueSpec(*(cudnn_epilogue._spec(t) for t in (x, w, residual, out, *affine, *following)))


def _block_plan(batch: int = 1) -> cudnn_epilogue._Plan:
    """The plan of one block's fused graph, as conv_add_slice asks for it."""
    signature, x, w, residual, out, affine, following = _block_operands(batch)
    return cudnn_epilogue._plan(signature, x.device, cudnn_plans.epilogue_uids(True, True),
                                _block_spec(x, w, residual, out, affine, following))


def test_plans_are_bound_by_the_uids_their_graph_gave_each_tensor(fake_frontend):
    plan = _block_plan()
    names = ["x", "weight", "residual", "scale", "shift", "next_scale", "next_shift", "out", "act", "next_act"]
    assert plan.uids == [plan.graph.uids[name] for name in names]  # the order run() binds tensors in
    assert len(set(plan.uids)) == len(names)
    _, x, _, residual, *_ = _block_operands()
    assert plan.graph.dims["x"] == (list(x.shape), list(x.stride()))  # the operands as PyTorch lays them out
    assert plan.graph.dims["residual"] == (list(residual.shape), list(residual.stride()))


def test_built_plans_are_stored_and_read_back_by_the_next_process(fake_frontend, tmp_path):
    cudnn_epilogue.use_plan_cache(tmp_path / "cudnn")
    built = _block_plan()
    files = list((tmp_path / "cudnn").glob("*.plan"))
    assert len(_FakeGraph.builds) == 1 and len(files) == 1
    assert not list((tmp_path / "cudnn").glob("*.tmp"))  # written whole, then renamed
    again = _block_plan()  # (what a fresh process finds)
    assert len(_FakeGraph.builds) == 1 and again.graph.loaded
    assert _FakeGraph.loads == [files[0].read_bytes()] == [bytes(built.graph.serialize())]
    assert again.uids == built.uids
    _block_plan(batch=2)  # another shape: its own plan
    assert len(_FakeGraph.builds) == 2 and len(list((tmp_path / "cudnn").glob("*.plan"))) == 2


def test_a_plan_from_another_gpu_or_cudnn_is_not_used(fake_frontend, tmp_path, monkeypatch):
    cudnn_epilogue.use_plan_cache(tmp_path)
    _block_plan()
    monkeypatch.setattr(cudnn_epilogue, "_environment", lambda device: "H200 sm90 cudnn 92000 frontend 1.16.0")
    plan = _block_plan()
    assert len(_FakeGraph.builds) == 2 and not plan.graph.loaded
    assert len(list(tmp_path.glob("*.plan"))) == 2


def test_a_damaged_plan_file_is_rebuilt_and_replaced(fake_frontend, tmp_path, caplog):
    cudnn_epilogue.use_plan_cache(tmp_path)
    _block_plan()
    (path,) = tmp_path.glob("*.plan")
    good = path.read_bytes()
    path.write_bytes(good[:2])  # a write cut short
    caplog.set_level("INFO", logger="emopipe.model.cudnn_plans")
    plan = _block_plan()
    assert not plan.graph.loaded and len(_FakeGraph.builds) == 2
    assert "does not load" in caplog.text and "building it again" in caplog.text
    assert path.read_bytes() == good


def test_an_unwritable_cache_costs_only_the_next_start(fake_frontend, tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    cudnn_epilogue.use_plan_cache(blocker / "cudnn")
    caplog.set_level("INFO", logger="emopipe.model.cudnn_plans")
    plan = _block_plan()
    assert plan.workspace_bytes == 64 and "cannot store the cuDNN plan" in caplog.text


def test_without_a_cache_folder_nothing_is_written(fake_frontend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cudnn_epilogue.use_plan_cache(None)
    _block_plan()
    _block_plan()
    assert len(_FakeGraph.builds) == 2 and not list(tmp_path.rglob("*.plan"))


def _depthwise_plan(stride: int = 1) -> cudnn_epilogue._Plan:
    """The plan of a depthwise convolution's graph (conv2d's), 8 channels at 6×6, 3×3, fp16 channels_last."""
    x = torch.zeros(2, 8, 6, 6, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    w = torch.zeros(8, 1, 3, 3, dtype=torch.float16)
    y = torch.zeros(2, 8, 6 // stride, 6 // stride, dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    signature = ("conv2d", (stride, stride), (1, 1), stride)
    spec = cudnn_plans.ConvSpec(*(cudnn_epilogue._spec(t) for t in (x, w, y)), (stride, stride), (1, 1))
    return cudnn_epilogue._plan(signature, x.device, cudnn_plans.CONV_UIDS, spec)


def test_a_convolution_plan_is_bound_stored_and_read_back_like_the_epilogues(fake_frontend, tmp_path):
    cudnn_epilogue.use_plan_cache(tmp_path)
    built = _depthwise_plan()
    assert built.uids == [built.graph.uids[name] for name in ("x", "weight", "y")]  # the order conv2d binds them
    again = _depthwise_plan()  # (what the next process finds)
    assert len(_FakeGraph.builds) == 1 and again.graph.loaded and again.uids == built.uids
    _depthwise_plan(stride=2)  # another shape: its own plan, beside the epilogue's in the same folder
    _block_plan()
    assert len(_FakeGraph.builds) == 3 and len(list(tmp_path.glob("*.plan"))) == 3


@pytest.fixture
def ahead(fake_frontend, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Plans found ahead on a stand-in GPU: the plan folder set, the frontend's graphs fake, the plans' runs
    recorded, and the builder processes done in this process (what they do: build and store each plan)."""
    cudnn_epilogue.use_plan_cache(tmp_path / "cudnn")
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    monkeypatch.setattr(cudnn_epilogue, "installed", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    record = types.SimpleNamespace(sent=[], runs=[], builders=[])
    monkeypatch.setattr(cudnn_epilogue._Plan, "run", lambda plan, tensors, results: record.runs.append(plan))

    class Builders:  # what the builder processes do, here: each plan built and stored, when they are waited for
        def __init__(self, ordinal: int) -> None:
            self.ordinal, self.jobs, self.state, self.early = ordinal, [], "working", False
            record.builders.append(self)

        def start(self) -> None:
            self.early = True

        def add(self, path, spec):  # type: ignore[no-untyped-def]
            self.jobs.append((path, spec))

        def finish(self) -> int:
            if self.jobs:
                record.sent.append((self.jobs, self.ordinal))
            for path, spec in self.jobs:
                cudnn_plans.write(cudnn_plans.build(None, spec), path)
            self.state = "finished"
            return len(self.jobs)

        def abandon(self) -> None:
            self.state = "abandoned"

    monkeypatch.setattr(cudnn_plans, "PlanBuilders", Builders)
    return record


def _one_of_each() -> tuple:
    """A block convolution's and a depthwise convolution's operands (CPU tensors, as the GPU's would be laid out)."""
    cl = torch.channels_last
    x = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=cl)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.float16)
    residual = torch.zeros(1, 8, 4, 4, dtype=torch.float16).contiguous(memory_format=cl)
    out = torch.full_like(residual, 7)
    scale, shift = torch.ones(1, 4, 1, 1), torch.zeros(1, 4, 1, 1)
    depthwise_x = torch.zeros(2, 8, 6, 6, dtype=torch.float16).contiguous(memory_format=cl)
    depthwise_w = torch.zeros(8, 1, 3, 3, dtype=torch.float16)
    return (x, w, residual, out, 4, scale, shift), (depthwise_x, depthwise_w, (2, 2), (1, 1))


def test_a_pass_finds_the_missing_plans_computes_nothing_and_they_are_built_at_once_after(ahead):
    block, depthwise = _one_of_each()
    with cudnn_epilogue.plans_built_ahead(torch.device("cuda", 1)) as found:
        assert found
        act = cudnn_epilogue.conv_add_slice(*block)
        y = cudnn_epilogue.conv2d(*depthwise)
        assert _FakeGraph.builds == [] and ahead.sent == [] and ahead.runs == []  # noted only
        assert (block[3] == 7).all()  # nothing computed: the pass finds shapes
        assert act.shape == (1, 4, 4, 4) and y.shape == (2, 8, 3, 3)
    ((jobs, ordinal),) = ahead.sent
    assert ordinal == 1 and len(jobs) == 2
    assert ahead.builders[0].early  # (an empty plan folder: started before the first plan was found)
    (epilogue_path, epilogue), (conv_path, conv) = jobs
    assert isinstance(epilogue, cudnn_plans.EpilogueSpec) and epilogue.x.dims == (1, 8, 4, 4)
    assert epilogue.out.dims == (1, 4, 4, 4) and epilogue.scale is not None and epilogue.next_act is None
    assert isinstance(conv, cudnn_plans.ConvSpec) and conv.stride == (2, 2) and conv.y.dims == (2, 8, 3, 3)
    assert epilogue_path.parent == conv_path.parent == cudnn_epilogue._cache_dir and epilogue_path != conv_path
    # the warm-up's next pass reads back what the builders stored, and runs it
    cudnn_epilogue.conv_add_slice(*block)
    cudnn_epilogue.conv2d(*depthwise)
    assert len(_FakeGraph.builds) == 2 and len(_FakeGraph.loads) == 2  # built by the builders, read back here
    assert [plan.graph.loaded for plan in ahead.runs] == [True, True]


def test_with_every_plan_on_disk_a_pass_runs_them_and_builds_nothing(ahead, monkeypatch):
    block, depthwise = _one_of_each()
    cudnn_epilogue.conv_add_slice(*block)  # (an earlier process's plans)
    cudnn_epilogue.conv2d(*depthwise)
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})  # a new process
    with cudnn_epilogue.plans_built_ahead(torch.device("cuda", 0)):
        cudnn_epilogue.conv_add_slice(*block)
        cudnn_epilogue.conv2d(*depthwise)
    assert ahead.sent == [] and len(ahead.runs) == 4 and len(_FakeGraph.loads) == 2
    assert not ahead.builders[0].early  # (plans in the folder: builders only for one found missing)


def test_a_window_within_a_window_hands_its_plans_to_the_outer_one_built_in_one_wave(ahead):
    """EmoNet's warm-up finds the detector's plans too where the frame size is known: the detector's and the
    engine's passes each open a window of their own inside the warm-up's, and every plan goes to one set of
    builders, waited for once, when the outer window ends."""
    block, depthwise = _one_of_each()
    device = torch.device("cuda", 0)
    with cudnn_epilogue.plans_built_ahead(device) as outer:
        assert outer
        with cudnn_epilogue.plans_built_ahead(device) as inner:  # the detector's pass
            assert inner
            cudnn_epilogue.conv2d(*depthwise)
        assert ahead.sent == [] and cudnn_epilogue._builders_here() is ahead.builders[0]  # not waited for yet
        with cudnn_epilogue.plans_built_ahead(device) as inner:  # the engine's pass
            assert inner
            cudnn_epilogue.conv_add_slice(*block)
        assert ahead.sent == [] and _FakeGraph.builds == []
    ((jobs, _),) = ahead.sent  # one wave, both networks' plans
    assert [type(spec) for _, spec in jobs] == [cudnn_plans.ConvSpec, cudnn_plans.EpilogueSpec]
    assert len(ahead.builders) == 1 and ahead.builders[0].state == "finished"
    assert cudnn_epilogue._builders_here() is None
    cudnn_epilogue.conv_add_slice(*block)  # the warm-up's passes then read both back
    cudnn_epilogue.conv2d(*depthwise)
    assert len(_FakeGraph.loads) == 2 and [plan.graph.loaded for plan in ahead.runs] == [True, True]


def test_plans_are_found_ahead_only_on_a_gpu_with_a_plan_folder(ahead, monkeypatch):
    with cudnn_epilogue.plans_built_ahead(torch.device("cpu")) as found:
        assert not found
    cudnn_epilogue.use_plan_cache(None)  # (builders could not hand their plans over)
    with cudnn_epilogue.plans_built_ahead(torch.device("cuda", 0)) as found:
        assert not found
        cudnn_epilogue.conv_add_slice(*_one_of_each()[0])  # built here, as without a pass
    assert len(_FakeGraph.builds) == 1 and ahead.sent == []


def test_a_pass_that_fails_builds_nothing_and_leaves_plans_to_be_built_as_before(ahead):
    block, _ = _one_of_each()
    with pytest.raises(RuntimeError, match="the pass failed"), \
            cudnn_epilogue.plans_built_ahead(torch.device("cuda", 0)):
        cudnn_epilogue.conv_add_slice(*block)
        raise RuntimeError("the pass failed")
    assert ahead.sent == [] and cudnn_epilogue._builders_here() is None
    assert [builders.state for builders in ahead.builders] == ["abandoned"]  # stopped, not waited for
    cudnn_epilogue.conv_add_slice(*block)
    assert len(_FakeGraph.builds) == 1 and len(ahead.runs) == 1


def test_another_threads_engine_builds_and_runs_its_plans_while_a_pass_finds_this_ones(ahead):
    """A pass belongs to its thread: another engine's thread, running meanwhile, computes as always."""
    block, depthwise = _one_of_each()
    other: list[object] = []
    with cudnn_epilogue.plans_built_ahead(torch.device("cuda", 0)):
        thread = threading.Thread(target=lambda: other.append(cudnn_epilogue.conv2d(*depthwise)))
        thread.start()
        thread.join(timeout=60)
        assert len(other) == 1 and len(_FakeGraph.builds) == 1 and len(ahead.runs) == 1  # built there, and run
        cudnn_epilogue.conv_add_slice(*block)  # this thread's: noted
    ((jobs, _),) = ahead.sent
    assert [type(spec) for _, spec in jobs] == [cudnn_plans.EpilogueSpec]


def test_a_plan_spec_reaches_its_builder_unchanged(tmp_path):
    block, depthwise = _one_of_each()
    x, w, residual, out, first, scale, shift = block
    part = slice(first, first + w.shape[0])
    following = (torch.empty_like(residual), torch.ones(1, 8, 1, 1), torch.zeros(1, 8, 1, 1))
    specs = [
        cudnn_plans.EpilogueSpec(*(cudnn_epilogue._spec(t) for t in (x, w, residual[:, part], out[:, part], scale,
                                                                      shift, following[0][:, part],
                                                                      following[1][:, part], following[2][:, part]))),
        cudnn_plans.ConvSpec(*(cudnn_epilogue._spec(t) for t in (depthwise[0], depthwise[1], depthwise[0])),
                             (2, 2), (1, 1)),
    ]
    for spec in specs:
        job = json.loads(json.dumps(cudnn_plans._job(tmp_path / "a.plan", spec)))
        assert cudnn_plans.spec_of(job["kind"], job["spec"]) == spec and job["path"] == str(tmp_path / "a.plan")


def test_a_builder_stores_its_plans_skips_those_there_and_says_which_cudnn_cannot_build(fake_frontend, tmp_path,
                                                                                        monkeypatch, capsys):
    from emopipe.model import cuda_context

    made_current = []
    monkeypatch.setattr(cuda_context, "make_current", lambda ordinal: made_current.append(ordinal) or True)
    monkeypatch.setattr(sys.modules["cudnn"], "create_handle", lambda: "handle", raising=False)
    _, depthwise = _one_of_each()
    spec = cudnn_plans.ConvSpec(*(cudnn_epilogue._spec(t) for t in (depthwise[0], depthwise[1], depthwise[0])),
                                (2, 2), (1, 1))
    there = tmp_path / "there.plan"
    there.write_bytes(b"PLAN earlier")
    refused = cudnn_plans.ConvSpec(spec.x, spec.weight, spec.y, (3, 3), (1, 1))
    monkeypatch.setattr(_FakeGraph, "build_plans", lambda graph: _refuse_stride_3(graph))
    _FakeGraph.strides.clear()
    lines = [json.dumps(cudnn_plans._job(path, job)) + "\n"
             for path, job in ((tmp_path / "new.plan", spec), (there, spec), (tmp_path / "refused.plan", refused))]
    assert cudnn_plans._serve(3, iter(lines)) == 0
    assert made_current == [3]
    assert (tmp_path / "new.plan").read_bytes().startswith(b"PLAN") and there.read_bytes() == b"PLAN earlier"
    assert not (tmp_path / "refused.plan").exists()
    assert "refused.plan: no engine for stride 3" in capsys.readouterr().err


def _refuse_stride_3(graph: _FakeGraph) -> None:
    if _FakeGraph.strides and _FakeGraph.strides[-1] == [3, 3]:
        raise RuntimeError("no engine for stride 3")
    _FakeGraph.builds.append(1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a GPU: the builders find none")
def test_builder_processes_without_a_gpu_leave_the_plans_to_the_warm_up(tmp_path, caplog):
    """Real builder processes (``python -m emopipe.model.cudnn_plans``): on a machine with no GPU each ends at once,
    saying why, and no plan is made; plans sent to a builder that has ended are dropped; the warm-up then goes on
    as it would without them."""
    _, depthwise = _one_of_each()
    spec = cudnn_plans.ConvSpec(*(cudnn_epilogue._spec(t) for t in (depthwise[0], depthwise[1], depthwise[0])),
                                (2, 2), (1, 1))
    caplog.set_level("INFO", logger="emopipe.model.cudnn_plans")
    builders = cudnn_plans.PlanBuilders(0, processes=3)
    builders.add(tmp_path / "0.plan", spec)
    assert len(builders._builders) == 1  # a builder a plan noted, up to three
    for k in range(1, 5):
        builders.add(tmp_path / f"{k}.plan", spec)
    builders.add(tmp_path / "0.plan", spec)  # the same plan noted again: once
    assert builders.finish() == 0 and len(builders.noted) == 5 and len(builders._builders) == 3
    assert caplog.text.count("ended with status 1 (no CUDA context on this GPU)") == 3
    assert "0 of 5 built in 3 processes" in caplog.text and not list(tmp_path.iterdir())


def test_a_builder_is_handed_the_cudnn_and_nvrtc_files_this_process_loaded(tmp_path):
    """cuDNN opens NVRTC by name; where PyTorch's wheels put them, only this process knows: a builder loads the same
    files first (dependencies first; cuDNN's own sub-libraries it opens itself, from beside libcudnn)."""
    lib = "/site/nvidia/{}/lib/{}"
    maps = tmp_path / "maps"
    maps.write_text("\n".join(f"7f00-7f01 r-xp 00000000 08:01 {k} {path}" for k, path in enumerate([
        lib.format("cudnn", "libcudnn.so.9"), lib.format("cudnn", "libcudnn_graph.so.9"), "/usr/lib/libc.so.6",
        lib.format("cu13", "libnvrtc.so.13"), lib.format("cu13", "libnvrtc-builtins.so.13.0"),
        lib.format("cudnn", "libcudnn.so.9"), lib.format("cu13", "libnvJitLink.so.13")])) + "\n7f02-7f03 rw-p 0 0 0\n")
    assert cudnn_plans._libraries_loaded(maps) == (
        lib.format("cu13", "libnvJitLink.so.13"), lib.format("cu13", "libnvrtc.so.13"),
        lib.format("cu13", "libnvrtc-builtins.so.13.0"), lib.format("cudnn", "libcudnn.so.9"))
    assert cudnn_plans._libraries_loaded(tmp_path / "no-such-file") == ()


@pytest.mark.parametrize(("cpus", "builders"), [(16, 12), (64, 12), (8, 6), (2, 1), (1, 1)])
def test_builders_for_the_machine(cpus, builders):
    assert cudnn_plans.builders_for(cpus) == builders


def test_builders_are_as_many_as_asked_or_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(cudnn_plans.os, "sched_getaffinity", lambda pid: set(range(6)), raising=False)
    monkeypatch.delenv(cudnn_plans.BUILDERS_VARIABLE, raising=False)
    assert cudnn_plans.builders_for() == 4  # (a container limited to 6 of the host's cores: 4, not the host's)
    monkeypatch.setenv(cudnn_plans.BUILDERS_VARIABLE, "3")  # (a Ray worker sets its share)
    assert cudnn_plans.builders_for() == 3
    monkeypatch.setenv(cudnn_plans.BUILDERS_VARIABLE, "0")
    assert cudnn_plans.builders_for() == 1
    monkeypatch.setenv(cudnn_plans.BUILDERS_VARIABLE, "many")  # not a count: the cores decide
    assert cudnn_plans.builders_for() == 4


def test_the_engines_warm_up_finds_each_shapes_plans_before_capturing_it(monkeypatch, tmp_path):
    """The pass runs once per static shape, before the shape's passes and capture, only where plans can be built
    ahead (here a stand-in says they can)."""
    seen: list[tuple] = []

    @contextlib.contextmanager
    def plans_built_ahead(device):  # type: ignore[no-untyped-def]
        seen.append(("enter", device.type))
        yield True
        seen.append(("leave",))

    monkeypatch.setattr(cudnn_epilogue, "plans_built_ahead", plans_built_ahead)
    monkeypatch.setattr(engine.EngineOptions, "resolved", lambda self, device: self)
    eng = engine.TorchEngine(build_emonet(random_state(8, seed=1)),
                             EngineOptions(device="cpu", precision="fp32", batch_size=2, cudnn_epilogue=True,
                                           cuda_graphs=False))
    compute = eng._compute
    eng._compute = lambda x: seen.append(("pass", tuple(x.shape))) or compute(x)
    eng.warmup()
    assert seen[:3] == [("enter", "cpu"), ("pass", (2, 3, 256, 256)), ("leave",)] and len(seen) > 3
    seen.clear()
    off = engine.TorchEngine(build_emonet(random_state(8, seed=1)),
                             EngineOptions(device="cpu", precision="fp32", batch_size=2, cudnn_epilogue=False))
    off.warmup()
    assert seen == []


def test_the_engine_keeps_plans_beside_the_models(monkeypatch, tmp_path):
    monkeypatch.setattr(cudnn_epilogue, "_cache_dir", None)
    # an engine on the CPU without the epilogue sets no plan folder (it has no cuDNN plans; set, the folder stayed
    # for every later caller of the process — in the test suite, tests that stub the frontend)
    engine.TorchEngine(build_emonet(random_state(8, seed=1)), EngineOptions(device="cpu"), cache_dir=tmp_path / "c")
    assert cudnn_epilogue._cache_dir is None
    monkeypatch.setattr(engine.EngineOptions, "resolved", lambda self, device: self)
    engine.TorchEngine(build_emonet(random_state(8, seed=1)), EngineOptions(device="cpu", precision="fp32",
                                                                            cudnn_epilogue=True),
                       cache_dir=tmp_path / "cache")
    assert cudnn_epilogue._cache_dir == tmp_path / "cache" / "cudnn"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused kernels)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
def test_a_plan_read_back_from_disk_computes_the_same(tmp_path, monkeypatch):
    x, w, residual, scale, shift = _gpu_block(seed=1)
    nxt = (torch.zeros_like(residual), torch.rand(1, 64, 1, 1, device="cuda") + 0.5,
           torch.randn(1, 64, 1, 1, device="cuda"))
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    cudnn_epilogue.use_plan_cache(tmp_path)
    try:
        outs = [torch.zeros_like(residual) for _ in range(3)]
        built = cudnn_epilogue.conv_add_slice(x, w, residual, outs[0], 16, scale, shift, nxt)
        built_next = nxt[0].clone()
        assert list(tmp_path.glob("*.plan"))
        monkeypatch.setattr(cudnn_epilogue, "_plans", {})

        def no_build(*args: object) -> None:
            raise AssertionError("the plan was built again instead of read back")

        monkeypatch.setattr(cudnn_plans, "build", no_build)
        nxt[0].zero_()
        loaded = cudnn_epilogue.conv_add_slice(x, w, residual, outs[1], 16, scale, shift, nxt)
        torch.testing.assert_close(loaded, built, atol=0, rtol=0)
        torch.testing.assert_close(outs[1], outs[0], atol=0, rtol=0)
        torch.testing.assert_close(nxt[0], built_next, atol=0, rtol=0)
        want = contract(x.float(), w.float(), residual.float(), outs[2], 16, scale, shift)
        torch.testing.assert_close(loaded.float(), want, atol=4e-3, rtol=4e-3)
    finally:
        cudnn_epilogue.use_plan_cache(None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's plans)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
@pytest.mark.parametrize(("shape", "kernel", "stride", "padding", "bias", "residual", "relu"), [
    ((4, 3, 256, 256), (64, 3, 7, 7), 2, 3, True, False, True),  # EmoNet's stem
    ((4, 64, 128, 128), (128, 64, 1, 1), 1, 0, False, False, False),  # a block's downsampling
    ((4, 256, 64, 64), (256, 256, 1, 1), 1, 0, True, False, True),  # a stack's last convolution
    ((8, 24, 64, 64), (24, 24, 1, 1), 1, 0, True, True, True),  # a BlazeFace block's pointwise convolution
    ((8, 24, 128, 128), (24, 1, 3, 3), 1, 1, False, False, False),  # BlazeFace's depthwise ones: stride 1,
    ((8, 48, 130, 130), (48, 1, 3, 3), 2, 0, False, False, False),  # stride 2 (padded right and bottom first),
    ((8, 96, 32, 32), (96, 1, 3, 3), 1, 1, False, False, False),  # deeper
])
def test_convolutions_through_a_plan_compute_what_pytorch_computes_and_read_back_the_same(
        tmp_path, monkeypatch, shape, kernel, stride, padding, bias, residual, relu):
    """conv2d (with a bias, a residual and a ReLU where given; grouped where the weight takes one channel) against
    PyTorch's convolution in float32, then read back from disk by a fresh process's lookup: the same results."""
    generator = torch.Generator(device="cuda").manual_seed(kernel[0])
    cl = torch.channels_last
    x = torch.randn(*shape, device="cuda", generator=generator).half().contiguous(memory_format=cl)
    fan_in = kernel[1] * kernel[2] * kernel[3]
    w = (torch.randn(*kernel, device="cuda", generator=generator) / fan_in ** 0.5).half().contiguous(memory_format=cl)
    b = torch.randn(kernel[0], device="cuda", generator=generator).half() if bias else None
    want = F.conv2d(x.float(), w.float(), b.float() if b is not None else None, stride, padding, 1,
                    shape[1] // kernel[1])
    z = torch.randn(want.shape, device="cuda", generator=generator).half().contiguous(memory_format=cl) \
        if residual else None
    want = want + z.float() if z is not None else want
    want = want.relu() if relu else want
    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    cudnn_epilogue.use_plan_cache(tmp_path)
    try:
        built = cudnn_epilogue.conv2d(x, w, (stride, stride), (padding, padding), b, z, relu)
        assert built.shape == want.shape and built.is_contiguous(memory_format=cl)
        torch.testing.assert_close(built.float(), want, atol=2e-2, rtol=1e-2)
        assert len(list(tmp_path.glob("*.plan"))) == 1
        monkeypatch.setattr(cudnn_epilogue, "_plans", {})

        def no_build(*args: object) -> None:
            raise AssertionError("the plan was built again instead of read back")

        monkeypatch.setattr(cudnn_plans, "build", no_build)
        loaded = cudnn_epilogue.conv2d(x, w, (stride, stride), (padding, padding), b, z, relu)
        torch.testing.assert_close(loaded, built, atol=0, rtol=0)
    finally:
        cudnn_epilogue.use_plan_cache(None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's plans)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
def test_plans_built_ahead_by_builder_processes_compute_what_plans_built_here_compute(tmp_path, monkeypatch):
    """A block convolution's and a depthwise convolution's plans found by a pass and built by real builder
    processes (no PyTorch in them), then read back: the same results, bit for bit, as plans built in this process."""
    x, w, residual, scale, shift = _gpu_block(seed=2)
    cl = torch.channels_last
    dx = torch.randn(4, 24, 32, 32, device="cuda").half().contiguous(memory_format=cl)
    dw = (torch.randn(24, 1, 3, 3, device="cuda") / 3).half().contiguous(memory_format=cl)

    def both() -> tuple[torch.Tensor, ...]:
        out = torch.zeros_like(residual)
        act = cudnn_epilogue.conv_add_slice(x, w, residual, out, 16, scale, shift)
        return act, out, cudnn_epilogue.conv2d(dx, dw, (1, 1), (1, 1))

    monkeypatch.setattr(cudnn_epilogue, "_plans", {})
    cudnn_epilogue.use_plan_cache(tmp_path / "here")
    try:
        here = both()
        monkeypatch.setattr(cudnn_epilogue, "_plans", {})  # a new process, a plan folder of its own
        cudnn_epilogue.use_plan_cache(tmp_path / "ahead")
        with cudnn_epilogue.plans_built_ahead(torch.device("cuda")) as found:
            assert found
            both()
        assert len(list((tmp_path / "ahead").glob("*.plan"))) == 2

        def no_build(*args: object) -> None:
            raise AssertionError("the plan was built here instead of read back")

        monkeypatch.setattr(cudnn_plans, "build", no_build)
        for got, want in zip(both(), here, strict=True):
            torch.testing.assert_close(got, want, atol=0, rtol=0)
    finally:
        cudnn_epilogue.use_plan_cache(None)


def test_engines_with_the_epilogue_take_turns(monkeypatch):
    """cuDNN's fused kernels hang the GPU when two engines run them at once (docs/benchmark-log.md): an
    engine that uses them holds the process's turn while its work runs; one without them does not."""
    monkeypatch.setattr(engine.EngineOptions, "resolved", lambda self, device: self)
    turn_taken: list[bool] = []

    def another_thread_tries() -> None:
        free = engine._EPILOGUE_TURN.acquire(blocking=False)
        if free:
            engine._EPILOGUE_TURN.release()
        turn_taken.append(not free)

    for epilogue in (True, False):
        e = TorchEngine(build_emonet(random_state(8, seed=1)),
                        EngineOptions(device="cpu", precision="fp32", batch_size=1, cudnn_epilogue=epilogue))
        compute = e._compute

        def watched(x: torch.Tensor, compute=compute) -> tuple[torch.Tensor, ...]:  # type: ignore[no-untyped-def]
            probe = threading.Thread(target=another_thread_tries)
            probe.start()
            probe.join()
            return compute(x)

        e._compute = watched
        e.warmup()  # (one forward on the CPU)
        e.infer(torch.rand(1, 3, 256, 256))
    assert turn_taken == [True, True, False, False]


class _StandInGraph:
    """A captured graph's interface on the CPU: launch returns at once, the outputs come at collect."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.synchronized = fail, 0

    def launch(self, crops: torch.Tensor):  # type: ignore[no-untyped-def]
        if self.fail:
            raise RuntimeError("CUDA error: out of memory")
        graph = self

        class Copied:
            def synchronize(self) -> None:
                graph.synchronized += 1

        return torch.full((crops.shape[0], 10), 0.1), Copied()

    def unpack(self, host: torch.Tensor) -> list[torch.Tensor]:
        return [host[:, :8], host[:, 8], host[:, 9]]


def test_a_launched_graph_batch_holds_the_turn_until_collected(monkeypatch):
    """With CUDA graphs the engine returns before the GPU has run: the turn stays taken from the launch until
    the batch is collected (two launched batches: until both are), and a launch that fails gives it back."""
    monkeypatch.setattr(engine.EngineOptions, "resolved", lambda self, device: self)
    e = TorchEngine(build_emonet(random_state(8, seed=1)),
                    EngineOptions(device="cpu", precision="fp32", batch_size=2, cudnn_epilogue=True))
    graph = e._graphs[2] = _StandInGraph()  # type: ignore[assignment]

    def taken() -> bool:
        got: list[bool] = []

        def attempt() -> None:
            free = engine._EPILOGUE_TURN.acquire(blocking=False)
            if free:
                engine._EPILOGUE_TURN.release()
            got.append(not free)

        probe = threading.Thread(target=attempt)
        probe.start()
        probe.join()
        return got[0]

    first, second = e.launch(torch.rand(2, 3, 256, 256)), e.launch(torch.rand(2, 3, 256, 256))
    assert taken() and graph.synchronized == 0
    out = first.collect()
    assert taken() and graph.synchronized == 1 and out.valence.tolist() == pytest.approx([0.1, 0.1])
    second.collect()
    assert not taken() and graph.synchronized == 2
    assert first.collect() is out and graph.synchronized == 2  # collected once
    e._graphs[2] = _StandInGraph(fail=True)  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="out of memory"):
        e.launch(torch.rand(2, 3, 256, 256))
    assert not taken()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (cuDNN's fused kernels)")
@pytest.mark.skipif(not cudnn_epilogue.installed(), reason="needs nvidia-cudnn-frontend")
def test_two_engines_on_two_streams_finish_with_the_same_results():
    model = build_emonet(random_state(8, seed=1))
    engines = [TorchEngine(model, EngineOptions(device="cuda", batch_size=32)) for _ in range(2)]
    for e in engines:
        e.warmup()
    crops = torch.rand(32, 3, 256, 256, device="cuda")
    alone = [e.infer(crops).probabilities for e in engines]
    results: dict[int, torch.Tensor] = {}

    def run(i: int) -> None:
        with torch.cuda.stream(torch.cuda.Stream()):
            for _ in range(30):
                results[i] = engines[i].infer(crops).probabilities

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "two engines running at once did not finish"
    for i in range(2):
        torch.testing.assert_close(results[i], alone[i], atol=0, rtol=0)
