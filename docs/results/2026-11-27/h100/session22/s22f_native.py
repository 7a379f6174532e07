"""Session 22 probe: the emopipe command with BlazeFace's depthwise convolutions through PyTorch's own depthwise
kernel (aten::_conv_depthwise2d) instead of cuDNN: each fused block's depthwise module patched once it is built."""
import sys

import torch

from emopipe.vision.detectors import blazeface


def native(conv):
    def forward(h):
        if not h.is_cuda:
            return torch.nn.functional.conv2d(h, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation,
                                              conv.groups)
        return torch.ops.aten._conv_depthwise2d(h, conv.weight, conv.kernel_size, conv.bias, conv.stride,
                                                conv.padding, conv.dilation)
    return forward


for cls in (blazeface.FusedBlazeBlock, blazeface.FusedFinalBlock):
    built = cls.__init__

    def __init__(self, block, _built=built):
        _built(self, block)
        self.depthwise.forward = native(self.depthwise)

    cls.__init__ = __init__
sys.argv[0] = "emopipe"
from emopipe.cli.app import run_and_exit  # noqa: E402

run_and_exit()
