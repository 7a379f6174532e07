"""Official-format EmoNet checkpoints for tests and benchmarks (the official weights are not reachable here)."""

from __future__ import annotations

import torch


def random_state(classes: int, seed: int = 0) -> dict:
    """An official-format EmoNet state dict (``module.`` prefix) with random, non-degenerate values.

    BatchNorm statistics are randomised too, so outputs differ between faces (a freshly initialised
    network's identity BatchNorms would make every face look alike).
    """
    import torch

    from emopipe.model.emonet import EmoNet

    torch.manual_seed(seed)
    model = EmoNet(classes)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
                n = module.num_features
                module.weight.uniform_(0.8, 1.2)
                module.bias.uniform_(-0.1, 0.1)
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.8, 1.5)
                module.num_batches_tracked.fill_(n)
    return {f"module.{k}": v for k, v in model.state_dict().items()}


def calibrated_state(classes: int, crops: torch.Tensor, seed: int = 0) -> dict:
    """A random checkpoint whose head is refitted so its outputs are not degenerate on real faces.

    A random network maps every face to nearly the same logits, so one class wins everywhere and any
    comparison of predicted classes passes trivially. Here the last layer is refitted on ``crops``
    (real-face crops): each output reads a random direction within the principal subspace of the
    head's 128 features, centred and scaled so that the expression logits spread with a standard
    deviation of 1.5 across faces and valence/arousal with 0.3 around 0 — predictions then vary from
    face to face, as a trained model's do. Evaluate on crops other than the calibration ones.
    """
    from emopipe.model.emonet import build_emonet

    state = random_state(classes, seed)
    model = build_emonet(state)
    features: list[torch.Tensor] = []
    hook = model.emo_fc_2[2].register_forward_hook(lambda _m, _i, out: features.append(out.detach()))
    with torch.inference_mode():
        for start in range(0, len(crops), 8):
            model(crops[start:start + 8])
    hook.remove()
    f = torch.cat(features).double()
    mean = f.mean(0)
    _, _, v = torch.linalg.svd(f - mean, full_matrices=False)
    basis = v[: min(len(v), 2 * (classes + 2))]  # the directions in which faces actually differ
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(classes + 2, len(basis), generator=generator, dtype=torch.float64) @ basis
    spread = ((f - mean) @ weight.T).std(0)
    target = torch.tensor([1.5] * classes + [0.3, 0.3], dtype=torch.float64)
    weight = weight * (target / spread)[:, None]
    bias = -(mean @ weight.T)
    state["module.emo_fc_2.3.weight"] = weight.float()
    state["module.emo_fc_2.3.bias"] = bias.float()
    return state
