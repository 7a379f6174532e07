"""EmoNet (Toisoul et al., Nature Machine Intelligence 2021), written from the published facts.

The network is a two-stack face-alignment hourglass (FAN) whose last heatmaps act as a spatial
attention mask over its features, followed by an emotion head that predicts expression logits,
valence and arousal. Module and parameter names follow the official checkpoints so their state
dicts load with strict key checking once the DataParallel ``module.`` prefix is stripped.

Unlike the published code this module has no import side effects, ``eval()`` is the stock one,
and there is no temporal smoothing inside the network (smoothing belongs to face tracks).
"""

from __future__ import annotations

import contextlib
import pickle
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from emopipe.errors import CheckpointError
from emopipe.types import LABELS, NUM_LANDMARKS


@dataclass(frozen=True)
class EmotionOutput:
    """What EmoNet predicts for a batch of N faces (tensors stay on the model's device)."""

    expression: torch.Tensor  # N×C logits, C = 8 or 5
    valence: torch.Tensor  # N, meaningful in [-1, 1]
    arousal: torch.Tensor  # N, meaningful in [-1, 1]
    heatmap: torch.Tensor | None  # N×68×64×64 landmark heatmaps of the last stack


class ConvBlock(nn.Module):
    """Pre-activation residual block whose output concatenates its three 3×3 branches."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        half, quarter = out_channels // 2, out_channels // 4
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv1 = nn.Conv2d(in_channels, half, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(half)
        self.conv2 = nn.Conv2d(half, quarter, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(quarter)
        self.conv3 = nn.Conv2d(quarter, quarter, 3, padding=1, bias=False)
        self.downsample: nn.Sequential | None = None
        if in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.BatchNorm2d(in_channels),
                nn.ReLU(inplace=True),
                nn.Conv2d(in_channels, out_channels, 1, bias=False),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.conv1(F.relu(self.bn1(x)))
        b = self.conv2(F.relu(self.bn2(a)))
        c = self.conv3(F.relu(self.bn3(b)))
        residual = x if self.downsample is None else self.downsample(x)
        return torch.cat((a, b, c), dim=1) + residual


class HourGlass(nn.Module):
    """Depth-4 hourglass of 256-channel ConvBlocks (keys ``b1_L``, ``b2_L``, ``b3_L``, ``b2_plus_1``)."""

    def __init__(self, depth: int = 4, channels: int = 256) -> None:
        super().__init__()
        self.depth = depth
        for level in range(depth, 0, -1):
            for branch in ("b1", "b2", "b3"):
                self.add_module(f"{branch}_{level}", ConvBlock(channels, channels))
        self.b2_plus_1 = ConvBlock(channels, channels)

    def _level(self, level: int, t: torch.Tensor) -> torch.Tensor:
        up = self.get_submodule(f"b1_{level}")(t)
        low = self.get_submodule(f"b2_{level}")(F.max_pool2d(t, 2, stride=2))
        low = self._level(level - 1, low) if level > 1 else self.b2_plus_1(low)
        low = self.get_submodule(f"b3_{level}")(low)
        return up + F.interpolate(low, scale_factor=2, mode="nearest")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._level(self.depth, x)


class EmoNet(nn.Module):
    """The published EmoNet: input N×3×256×256 RGB in [0, 1], no mean/std normalisation."""

    num_stacks = 2

    def __init__(self, num_classes: int = 8) -> None:
        super().__init__()
        if num_classes not in LABELS:
            raise ValueError(f"EmoNet has 8 or 5 expression classes, got {num_classes}")
        self.num_classes = num_classes
        # Stem: 256×256 → 64×64 with 256 channels.
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.bn1 = nn.BatchNorm2d(64)
        self.conv2 = ConvBlock(64, 128)
        self.conv3 = ConvBlock(128, 128)
        self.conv4 = ConvBlock(128, 256)
        # Two stacked hourglasses; the first feeds its features and heatmaps forward.
        for i in range(self.num_stacks):
            self.add_module(f"m{i}", HourGlass())
            self.add_module(f"top_m_{i}", ConvBlock(256, 256))
            self.add_module(f"conv_last{i}", nn.Conv2d(256, 256, 1))
            self.add_module(f"bn_end{i}", nn.BatchNorm2d(256))
            self.add_module(f"l{i}", nn.Conv2d(256, NUM_LANDMARKS, 1))
        self.bl0 = nn.Conv2d(256, 256, 1)
        self.al0 = nn.Conv2d(NUM_LANDMARKS, 256, 1)
        # Emotion head over the stem features and the heatmap-weighted hourglass features.
        self.conv1x1_input_emo_2 = nn.Conv2d(256 * (self.num_stacks + 1), 256, 1)
        head: list[nn.Module] = []
        for _ in range(4):
            head += [ConvBlock(256, 256), nn.MaxPool2d(2, 2)]
        self.emo_net_2 = nn.Sequential(*head)
        self.avg_pool_2 = nn.AvgPool2d(4)
        self.emo_fc_2 = nn.Sequential(
            nn.Linear(256, 128),
            nn.BatchNorm1d(128),
            nn.ReLU(inplace=True),
            nn.Linear(128, num_classes + 2),
        )

    @property
    def labels(self) -> tuple[str, ...]:
        return LABELS[self.num_classes]

    def forward(self, x: torch.Tensor) -> EmotionOutput:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(self.conv2(x), 2, stride=2)
        x = self.conv4(self.conv3(x))

        previous = x
        features: list[torch.Tensor] = []
        heatmap = x  # replaced by the first stack
        for i in range(self.num_stacks):
            f = self.get_submodule(f"top_m_{i}")(self.get_submodule(f"m{i}")(previous))
            f = F.relu(self.get_submodule(f"bn_end{i}")(self.get_submodule(f"conv_last{i}")(f)))
            heatmap = self.get_submodule(f"l{i}")(f)
            if i < self.num_stacks - 1:
                f = self.bl0(f)
                previous = previous + f + self.al0(heatmap)
            features.append(f)

        # The summed landmark heatmaps weight the hourglass features (spatial attention).
        mask = heatmap.sum(dim=1, keepdim=True)
        emotion_input = torch.cat((x, torch.cat(features, dim=1) * mask), dim=1)
        y = self.emo_net_2(self.conv1x1_input_emo_2(emotion_input))
        y = self.emo_fc_2(self.avg_pool_2(y).flatten(1))
        c = self.num_classes
        return EmotionOutput(expression=y[:, :c], valence=y[:, c], arousal=y[:, c + 1], heatmap=heatmap)


def _strip_prefix(state: Mapping[str, torch.Tensor], prefix: str = "module.") -> dict[str, torch.Tensor]:
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in state.items()}


def classes_in_checkpoint(state: Mapping[str, torch.Tensor]) -> int:
    """The expression class count, read from the last layer (shape [C+2, 128])."""
    key = "emo_fc_2.3.weight"
    if key not in state:
        raise CheckpointError(f"not an EmoNet checkpoint: it has no '{key}' (its first keys: {_first_keys(state)})")
    classes = int(state[key].shape[0]) - 2
    if classes not in LABELS:
        raise CheckpointError(
            f"'{key}' has shape {tuple(state[key].shape)}: {classes} expression classes, expected 8 or 5"
        )
    return classes


def _first_keys(state: Mapping[str, object], n: int = 3) -> str:
    keys = list(state)
    return ", ".join(keys[:n]) + (" …" if len(keys) > n else "") if keys else "none"


def _summarise(keys: list[str], n: int = 6) -> str:
    return ", ".join(keys[:n]) + (f" … ({len(keys)} in all)" if len(keys) > n else "")


def load_state(model: EmoNet, state: Mapping[str, torch.Tensor]) -> None:
    """Strict load that names missing/unexpected keys and mismatched shapes in one message."""
    expected = model.state_dict()
    optional = {k for k in expected if k.endswith("num_batches_tracked")}
    missing = sorted(k for k in expected if k not in state and k not in optional)
    unexpected = sorted(k for k in state if k not in expected)
    wrong_shape = [
        f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    problems = []
    if missing:
        problems.append(f"missing keys: {_summarise(missing)}")
    if unexpected:
        problems.append(f"unexpected keys: {_summarise(unexpected)}")
    if wrong_shape:
        problems.append(f"wrong shapes: {_summarise(wrong_shape, 3)}")
    if problems:
        raise CheckpointError("checkpoint does not fit EmoNet: " + "; ".join(problems))
    model.load_state_dict(state, strict=False)  # strictness was checked above, with better messages


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """Read an official-format checkpoint (plain state dict, optional ``module.`` prefix)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except Exception as exc:
        if what := _not_a_checkpoint(path):  # torch's own error would be a stray KeyError or EOFError
            raise CheckpointError(f"cannot read checkpoint {path}: {what}") from None
        if isinstance(exc, pickle.UnpicklingError):  # (PyTorch would advise weights_only=False: never safe here)
            raise CheckpointError(f"cannot read checkpoint {path}: not a PyTorch state dict of tensors (damaged, or "
                                  "it holds Python objects, which emopipe never loads: they could run code)") from None
        # torch raises many kinds for a damaged file; a cut one's (its zip archive's end missing) goes on for 300
        # characters about miniz: its first sentence, and what it means
        said = re.split(r"(?<=\.) ", str(exc).splitlines()[0] if str(exc) else "")[0]
        if "zip archive" in said:
            raise CheckpointError(f"cannot read checkpoint {path}: the file is damaged or incomplete (a download or "
                                  f"copy cut short?): {said}") from None
        raise CheckpointError(f"cannot read checkpoint {path}: {type(exc).__name__}: {said}") from None
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path} is not a state dict of tensors")
    return _strip_prefix(state)


def _not_a_checkpoint(path: Path) -> str | None:
    """Why ``path`` is no PyTorch file at all, from its first bytes: torch.save writes a zip archive (a legacy
    file is a pickle, whose first byte is 0x80); None when it looks like one."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not head:
        return "the file is empty, not a PyTorch checkpoint"
    if head == b"PK\x03\x04" or head[:1] == b"\x80":
        return None
    return "not a PyTorch checkpoint (torch.save writes a zip archive; this file is not one)"


def build_emonet(state: Mapping[str, torch.Tensor] | None = None, *, classes: int = 8) -> EmoNet:
    """An EmoNet in eval mode, from a state dict (class count read from it) or randomly initialised."""
    if state is not None:
        state = _strip_prefix(state)
        classes = classes_in_checkpoint(state)
    model = EmoNet(classes)
    if state is not None:
        load_state(model, state)
    return model.eval().requires_grad_(False)


def load_emonet(checkpoint: str | Path | None = None, *, classes: int = 8, device: str | torch.device = "cpu",
                models_dir: str | Path | None = None) -> EmoNet:
    """The published EmoNet in eval mode.

    ``checkpoint`` is None (the published ``emonet_{classes}`` weights, downloaded and verified
    on first use), a manifest name such as ``"emonet_5"``, or a path to an official-format file
    (used as given; its class count comes from the file, not from ``classes``).
    """
    from emopipe.model import weights
    from emopipe.model.devices import resolve_device

    if checkpoint is None:
        path = weights.ensure(f"emonet_{classes}", models_dir)
    elif isinstance(checkpoint, str) and checkpoint in weights.load_manifest():
        path = weights.ensure(checkpoint, models_dir)
    else:
        path = weights.user_file(checkpoint)
    with naming(path):
        model = build_emonet(read_checkpoint(path))
    return model.to(resolve_device(str(device)))


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """A checkpoint that does not fit EmoNet (its keys, its shapes) said with its file's name."""
    try:
        yield
    except CheckpointError as exc:
        if str(path) in str(exc):
            raise
        raise CheckpointError(f"{path}: {exc}") from None
