"""Session 34: PyNvVideoCodec's core decoder (CreateDemuxer + CreateDecoder + Decode(packet), every call in the
caller's thread, no native decoding thread) against the threaded decoder emopipe uses.

python3 core_probe.py STEP ARGS... ; each step prints one JSON line."""
import json
import os
import sys
import threading
import time

os.environ.setdefault("LOGGER_LEVEL", "FATAL")
import PyNvVideoCodec as nvc
import torch

RGB = nvc.OutputColorType.RGB


def out(**kw):
    print(json.dumps(kw), flush=True)


def core_new(codec, gpu=0, **extra):
    return nvc.CreateDecoder(gpuid=gpu, codec=codec, usedevicememory=True, outputColorType=RGB, **extra)


def core_frames(path, decoder=None, keep=True, limit=None):
    """Every frame of path through the core decoder: (pts list, list of uint8 HxWx3 tensors or None, seconds to the
    first frame, total seconds, the decoder)."""
    t0 = time.perf_counter()
    demuxer = nvc.CreateDemuxer(path)
    if decoder is None:
        decoder = core_new(demuxer.GetNvCodecId())
    pts, frames, first = [], [], None
    for packet in demuxer:
        for frame in decoder.Decode(packet):
            if first is None:
                first = time.perf_counter() - t0
            pts.append(int(frame.getPTS()))
            t = torch.from_dlpack(frame)
            frames.append(t.clone() if keep else None)
            if limit and len(pts) >= limit:
                return pts, frames, first, time.perf_counter() - t0, decoder
    torch.cuda.synchronize()
    return pts, frames, first, time.perf_counter() - t0, decoder


def threaded_frames(path, keep=True):
    t0 = time.perf_counter()
    dec = nvc.ThreadedDecoder(path, buffer_size=16, gpu_id=0, use_device_memory=True, output_color_type=RGB)
    pts, frames, first = [], [], None
    while True:
        batch = dec.get_batch_frames(16)
        if not batch:
            break
        if first is None:
            first = time.perf_counter() - t0
        for frame in batch:
            pts.append(int(frame.getPTS()))
            t = torch.from_dlpack(frame)
            frames.append(t.clone() if keep else None)
    torch.cuda.synchronize()
    total = time.perf_counter() - t0
    dec.end()
    return pts, frames, first, total


def step_api(path):
    decoder = core_new(nvc.CreateDemuxer(path).GetNvCodecId())
    out(step="api", dir_decoder=[a for a in dir(decoder) if not a.startswith("__")],
        doc=(nvc.CreateDecoder.__doc__ or "")[:1500])


def step_equal(path):
    """Same frames, PTS and pixels as the threaded decoder."""
    tp, tf, tfirst, ttotal = threaded_frames(path)
    cp, cf, cfirst, ctotal, _ = core_frames(path)
    n = min(len(tf), len(cf))
    diffs = [int((a.int() - b.int()).abs().max()) for a, b in zip(tf[:n], cf[:n])] if n else []
    out(step="equal", path=os.path.basename(path), threaded_frames=len(tp), core_frames=len(cp), same_pts=tp == cp,
        pts_head=[tp[:4], cp[:4]], max_pixel_diff=max(diffs) if diffs else None,
        shape=list(cf[0].shape) if cf else None,
        threaded_first_s=round(tfirst, 4), core_first_s=round(cfirst, 4), threaded_total_s=round(ttotal, 3),
        core_total_s=round(ctotal, 3))


def step_reuse(paths):
    """One core decoder over several files in turn (the pool's use): each file's first-frame time and frame count,
    against a new decoder per file; frames equal to a new decoder's."""
    rows = []
    decoder = None
    for path in paths:
        ref = core_frames(path)
        if decoder is not None:
            d = nvc.CreateDemuxer(path)
            try:
                decoder.setReconfigParams(d.Width(), d.Height())
            except Exception as exc:
                rows.append(f"setReconfigParams: {exc}")
            del d
        got = core_frames(path, decoder)
        decoder = got[4]
        n = min(len(ref[1]), len(got[1]))
        same = all(torch.equal(a, b) for a, b in zip(ref[1][:n], got[1][:n]))
        rows.append(dict(file=os.path.basename(path), new_first_s=round(ref[2], 4), reused_first_s=round(got[2], 4),
                         new_frames=len(ref[0]), reused_frames=len(got[0]), same_pts=ref[0] == got[0],
                         same_pixels=same))
    out(step="reuse", rows=rows)


def step_speed(path, rounds=3):
    rows = []
    for _ in range(rounds):
        _, _, tfirst, ttotal = threaded_frames(path, keep=False)
        cp, _, cfirst, ctotal, _ = core_frames(path, keep=False)
        rows.append(dict(threaded_fps=round(len(cp) / ttotal), core_fps=round(len(cp) / ctotal),
                         threaded_first_s=round(tfirst, 4), core_first_s=round(cfirst, 4)))
    out(step="speed", path=os.path.basename(path), rows=rows)


def _counter_rate(seconds, work=None):
    """Iterations per second of a pure-Python loop in a side thread, while ``work`` runs in this thread."""
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    thread = threading.Thread(target=spin)
    thread.start()
    t0 = time.perf_counter()
    if work is None:
        time.sleep(seconds)
    else:
        work()
    elapsed = time.perf_counter() - t0
    stop.set()
    thread.join()
    return count[0] / elapsed, elapsed


def step_gil(path):
    """How much of Python's interpreter lock each decoder's reading holds: a side thread's loop rate while it reads,
    against its rate beside a sleep."""
    idle, _ = _counter_rate(1.0)
    core, core_s = _counter_rate(0, lambda: core_frames(path, keep=False))
    threaded, threaded_s = _counter_rate(0, lambda: threaded_frames(path, keep=False))
    idle2, _ = _counter_rate(1.0)
    out(step="gil", idle_rate=round(idle), idle_rate_after=round(idle2), core_rate=round(core), core_s=round(core_s, 3),
        threaded_rate=round(threaded), threaded_s=round(threaded_s, 3),
        core_share_of_idle=round(core / idle, 3), threaded_share_of_idle=round(threaded / idle, 3))


def step_unsupported(path):
    """A stream NVDEC cannot decode: does the core decoder raise in this thread?"""
    try:
        pts, _, _, _, _ = core_frames(path, limit=2)
        out(step="unsupported", path=os.path.basename(path), raised=False, frames=len(pts))
    except Exception as exc:
        out(step="unsupported", path=os.path.basename(path), raised=True, type=type(exc).__name__,
            message=str(exc)[:400])


def step_stress(kind, threads, seconds, paths):
    """``threads`` threads each reading whole files over and over for ``seconds``: kind core (a decoder per thread,
    kept from file to file) or threaded (a new one per file, as before the pool) or mixed (core readers while
    other threads make demuxers)."""
    threads, seconds = int(threads), float(seconds)
    done = [0] * threads
    errors = []
    deadline = time.perf_counter() + seconds

    def run(k):
        decoder = None
        i = k
        try:
            while time.perf_counter() < deadline:
                path = paths[i % len(paths)]
                i += 1
                if kind == "core":
                    if decoder is not None:
                        d = nvc.CreateDemuxer(path)
                        decoder.setReconfigParams(d.Width(), d.Height())
                        del d
                    decoder = core_frames(path, decoder, keep=False)[4]
                elif kind == "corenew":
                    core_frames(path, None, keep=False)
                else:
                    threaded_frames(path, keep=False)
                done[k] += 1
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out(step="stress", kind=kind, threads=threads, readers=sum(done), seconds=round(time.perf_counter() - t0, 1),
        errors=errors[:5])


if __name__ == "__main__":
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    name, args = sys.argv[1], sys.argv[2:]
    if name == "stress":
        step_stress(args[0], args[1], args[2], args[3:])
    elif name == "reuse":
        step_reuse(args)
    else:
        globals()[f"step_{name}"](*args)
