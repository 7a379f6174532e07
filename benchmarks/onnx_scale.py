#!/usr/bin/env python3
"""ONNX Runtime against PyTorch on a checkpoint whose valence and arousal are ~10× the published range.

    PYTHONPATH=/tmp/ortsite:. python3 benchmarks/onnx_scale.py --video clip.mp4 --out onnx-scale \
        --detector blazeface_back --models-dir shared/models/blazeface

A fine-tuned or re-trained EmoNet can give valence around -10 where the published checkpoints stay within
±1. This writes such a checkpoint (random official-format weights whose final layer's valence and arousal
rows are scaled ten-fold and shifted to about -10 and +5), runs the whole command on ``--video`` with
``--backend torch`` and ``--backend onnxruntime`` at fp16 and fp32 (every run exports and checks its ONNX
file against exact fp32 PyTorch first; exit 6 there is the failure this benchmark exists to catch), and
compares the rows of each ONNX Runtime run with the PyTorch run at the same precision: boxes, labels,
max |Δ valence|, |Δ arousal|, and those differences relative to the outputs' scale (the relative tolerance
of emopipe.engines.parity: 1e-2 fp16, 1e-3 fp32, times max(1, max |value|)). Prints a table, writes
``OUT/onnx_scale.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic import random_checkpoint

RELATIVE_TOLERANCE = {"fp16": 1e-2, "fp32": 1e-3}


def tenfold_checkpoint(path: Path, scale: float = 10.0) -> Path:
    import torch

    random_checkpoint(path, classes=8, seed=7)
    state = torch.load(path, weights_only=True)
    weight, bias = state["emo_fc_2.3.weight"], state["emo_fc_2.3.bias"]
    weight[8:] *= scale
    bias[8:] = bias[8:] * scale + torch.tensor([-10.0, 5.0])
    torch.save(state, path)
    return path


def run(video: Path, out: Path, weights: Path, backend: str, precision: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "emopipe", str(video), "-o", str(out), "--weights", str(weights),
               "--backend", backend, "--precision", precision, "--detector", args.detector, "--no-progress"]
    if args.models_dir:
        command += ["--models-dir", args.models_dir]
    t0 = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    return {"backend": backend, "precision": precision, "exit": done.returncode,
            "seconds": round(time.perf_counter() - t0, 2), "log_tail": done.stderr.strip().splitlines()[-6:]}


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def compare(found: list[dict[str, str]], reference: list[dict[str, str]], precision: str) -> dict:
    boxes = [(r["frame"], r["x1"], r["y1"], r["x2"], r["y2"]) for r in found] == \
            [(r["frame"], r["x1"], r["y1"], r["x2"], r["y2"]) for r in reference]
    pairs = list(zip(found, reference, strict=True)) if len(found) == len(reference) else []
    probability_columns = [c for c in reference[0] if c.startswith("p_")] if reference else []
    disagreements = []
    for a, b in pairs:
        if a["label"] != b["label"]:
            top = sorted((float(b[c]) for c in probability_columns), reverse=True)
            disagreements.append({"frame": b["frame"], "torch": b["label"], "onnxruntime": a["label"],
                                  "torch_top2_gap": round(top[0] - top[1], 6)})
    dv = max((abs(float(a["valence"]) - float(b["valence"])) for a, b in pairs), default=float("nan"))
    da = max((abs(float(a["arousal"]) - float(b["arousal"])) for a, b in pairs), default=float("nan"))
    scale = max((max(abs(float(b["valence"])), abs(float(b["arousal"]))) for b in reference), default=1.0)
    limit = RELATIVE_TOLERANCE[precision] * max(1.0, scale)
    return {"rows": len(found), "reference_rows": len(reference), "boxes_identical": boxes,
            "labels_identical": bool(pairs) and not disagreements, "label_disagreements": disagreements[:10],
            "max_abs_dv": dv, "max_abs_da": da, "scale": round(scale, 4), "limit": limit,
            "within_relative_tolerance": max(dv, da) <= limit,
            "valence_range": [min(float(b["valence"]) for b in reference), max(float(b["valence"]) for b in reference)]
            if reference else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--video", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--detector", default="blazeface_back")
    parser.add_argument("--models-dir", default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    weights = tenfold_checkpoint(args.out / "emonet_tenfold.pth")
    import onnxruntime
    import torch

    result: dict = {"date": time.strftime("%Y-%m-%d"), "gpu": torch.cuda.get_device_name(0)
                    if torch.cuda.is_available() else "none", "torch": torch.__version__,
                    "onnxruntime": onnxruntime.__version__, "onnxruntime_file": onnxruntime.__file__,
                    "providers": onnxruntime.get_available_providers(), "video": str(args.video), "runs": [],
                    "comparisons": {}}
    for precision in ("fp16", "fp32"):
        for backend in ("torch", "onnxruntime"):
            out = args.out / f"{backend}-{precision}.csv"
            result["runs"].append(run(args.video, out, weights, backend, precision, args))
            print(json.dumps(result["runs"][-1]), flush=True)
        torch_rows, ort_rows = (args.out / f"{b}-{precision}.csv" for b in ("torch", "onnxruntime"))
        if torch_rows.is_file() and ort_rows.is_file():
            result["comparisons"][precision] = compare(rows(ort_rows), rows(torch_rows), precision)
    (args.out / "onnx_scale.json").write_text(json.dumps(result, indent=2))
    print(f"\n{result['gpu']}, torch {result['torch']}, onnxruntime {result['onnxruntime']}")
    print("| precision | exits (torch, ort) | rows | boxes same | labels same | max ΔV | max ΔA | scale | limit | ok |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for precision in ("fp16", "fp32"):
        exits = [r["exit"] for r in result["runs"] if r["precision"] == precision]
        c = result["comparisons"].get(precision)
        if c is None:
            print(f"| {precision} | {exits} | – | – | – | – | – | – | – | no rows |")
            continue
        print(f"| {precision} | {exits} | {c['rows']} | {c['boxes_identical']} | {c['labels_identical']} | "
              f"{c['max_abs_dv']:.2e} | {c['max_abs_da']:.2e} | {c['scale']:.2f} | {c['limit']:.2e} | "
              f"{c['within_relative_tolerance']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
