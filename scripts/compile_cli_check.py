"""The `emopipe` command with `--compile blocks` against the default path, as a user runs it.

    python3 scripts/compile_cli_check.py --out DIR [--frames 600] [--faces 4]

Synthesises a 1280×720 clip with several moving real faces (the astronaut), writes a random
official-format 8-class checkpoint, then runs the real command in fresh processes: the default
path, `--compile blocks` with an empty models directory (cold Inductor cache) and again with the cache
it left (warm). Prints, per run, the command's own load / warmup seconds, wall time and frames/s, and
how far each compiled run's rows are from the default run's (class agreement, |Δvalence|, |Δarousal|).
BlazeFace (real weights from shared/models/blazeface) finds the faces; EmoNet is what the option changes.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def synthesise(path: Path, frames: int, faces: int) -> None:
    from synth import background, paste_head, write_video

    w, h = 1280, 720
    images = []
    for i in range(frames):
        frame = background(w, h, seed=i % 7)
        t = i / max(1, frames - 1)
        for k in range(faces):
            paste_head(frame, w * (k + 0.5) / faces + 40 * np.sin(6 * t + k), h * (0.5 + 0.1 * np.cos(4 * t + k)),
                       1.1 + 0.3 * t)
        images.append(frame)
    write_video(path, images, 30.0)


def rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open() as f:
        return {(r["frame"], r["track_id"]): r for r in csv.DictReader(f)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--faces", type=int, default=4)
    args = parser.parse_args()
    import torch
    from checkpoints import random_state

    args.out.mkdir(parents=True, exist_ok=True)
    clip, weights = args.out / "clip.mp4", args.out / "emonet_random.pth"
    synthesise(clip, args.frames, args.faces)
    torch.save(random_state(8, seed=1), weights)
    blazeface = next(p for p in (REPO / "shared/models/blazeface", REPO.parent / "shared/models/blazeface")
                     if p.is_dir())
    runs = [("default", [], False), ("compile blocks, cold", ["--compile", "blocks"], False),
            ("compile blocks, warm", ["--compile", "blocks"], True)]
    models = args.out / "models"
    results = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)  # the command keeps its cache in the models directory
    for name, extra, warm in runs:
        if not warm:
            shutil.rmtree(models, ignore_errors=True)
            shutil.copytree(blazeface, models)
        out = args.out / f"{name.replace(' ', '_').replace(',', '')}.csv"
        summary = out.with_suffix(".summary.json")
        cmd = [sys.executable, "-m", "emopipe", str(clip), "-o", str(out), "--summary", str(summary),
               "--detector", "blazeface_back", "--models-dir", str(models), "--weights", str(weights),
               "--no-progress", *extra]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            print(f"{name}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
            results.append({"run": name, "error": done.stderr.strip().splitlines()[-1:]})
            continue
        s = json.loads(summary.read_text())
        results.append({"run": name, "wall_s": wall, "summary": s, "csv": out.name})
    baseline = rows(args.out / results[0]["csv"]) if "csv" in results[0] else {}
    print(f"\n{torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}, torch {torch.__version__}; "
          f"{args.frames} frames 1280×720, {args.faces} faces a frame")
    print("| run | load s | warmup s | wall s | frames/s | faces | class agreement | max |Δvalence| | max |Δarousal| |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['run']} | failed: {r['error']} |")
            continue
        s = r["summary"]
        got = rows(args.out / r["csv"])
        same = [k for k in got if k in baseline]
        agree = np.mean([got[k]["label"] == baseline[k]["label"] for k in same]) if same else float("nan")
        dv = max((abs(float(got[k]["valence"]) - float(baseline[k]["valence"])) for k in same), default=float("nan"))
        da = max((abs(float(got[k]["arousal"]) - float(baseline[k]["arousal"])) for k in same), default=float("nan"))
        r.update(agreement=agree, max_dvalence=dv, max_darousal=da, rows=len(got), matched=len(same))
        print(f"| {r['run']} | {s['load_s']:.1f} | {s['warmup_s']:.1f} | "
              f"{r['wall_s']:.1f} | {s['fps']:.0f} | {len(got)} | {agree:.2%} | "
              f"{dv:.4f} | {da:.4f} |")
    (args.out / "compile_cli_check.json").write_text(json.dumps(results, indent=1, default=str))
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
