#!/usr/bin/env python3
"""Record the cuDNN plans each common GPU configuration needs: ``emopipe/model/plan_recipes.json``, from which a command
builds its plans from its first moment (``emopipe/model/early_plans.py``). Run on a GPU, with the ``[cudnn]`` extra:

    python3 benchmarks/record_plan_recipes.py --models-dir shared/models/blazeface [--out FILE]

Each configuration is built and EmoNet's and the detector's first passes recorded
(:func:`emopipe.pipeline.models.plan_recipes`; the plans are built into ``--models-dir``'s plan folder as a warm-up
would); then each recipe's file is worked out as the early build does it (the GPU's name from the driver, not from
PyTorch) and checked to be the file the warm-up used. Random EmoNet weights: the plans depend on shapes only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (EmoNet batch, detector, detector batch): files on CUDA (64 faces, 32 frames), one camera live (1 and 1)
CONFIGS = [(64, "blazeface_back", 32), (64, "blazeface", 32), (1, "blazeface", 1), (1, "blazeface_back", 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", required=True, help="BlazeFace's weights (their plan folder is written)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "emopipe" / "model" /
                        "plan_recipes.json")
    args = parser.parse_args()

    import synthetic

    from emopipe.config import RunConfig
    from emopipe.model import cuda_context, cudnn_epilogue, cudnn_plans, early_plans
    from emopipe.pipeline.models import plan_recipes

    weights = synthetic.random_checkpoint(Path(tempfile.mkdtemp()) / "emonet.pth")
    recipes: dict[str, list[early_plans.Recipe]] = {}
    for batch, detector, detect_batch in CONFIGS:
        config = RunConfig(source="clip.mp4", weights=str(weights), models_dir=args.models_dir, detector=detector,
                           batch_size=batch, detect_batch=detect_batch).resolved("cuda")
        for key, found in plan_recipes(config).items():
            recipes.setdefault(key, found)
            print(f"{key}: {len(found)} plans")
    folder = cudnn_epilogue.plan_folder()  # (the one the engines used)
    model = cuda_context.device_model(0)
    assert folder is not None and model is not None
    environment = cudnn_plans.environment(*model)
    paths = early_plans.wanted_plans(folder, environment, list(recipes), recipes)
    missing = [path for path in paths if not path.exists()]
    print(f"environment from the driver: {environment!r}; {len(paths)} plan files, {len(missing)} not where the "
          "warm-up put them")
    if missing:
        return 1
    early_plans.save_recipes(recipes, args.out)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
