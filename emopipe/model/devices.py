"""Device names as users write them: ``auto``, ``cpu``, ``cuda``, ``cuda:N``."""

from __future__ import annotations

import torch

from emopipe.errors import UsageError
from emopipe.types import PRECISION_NAMES

# The one table of precisions: name → torch dtype. Engines take any; detectors and ONNX exports take
# fp32 and fp16 (DETECTOR_PRECISIONS, ONNX_PRECISIONS name their subsets).
PRECISIONS: dict[str, torch.dtype] = dict(zip(PRECISION_NAMES, (torch.float32, torch.float16, torch.bfloat16)))


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` picks the first CUDA GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"device {name!r} asked for, but PyTorch sees no CUDA GPU here (use --device cpu)")
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise UsageError(f"device {name!r} asked for, but there are {torch.cuda.device_count()} CUDA GPU(s)")
        return torch.device("cuda", index)
    if device.type != "cpu":
        raise UsageError(f"unsupported device {name!r}: use auto, cpu, cuda or cuda:N")
    return device
