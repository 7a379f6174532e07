"""Can one ThreadedDecoder be reused for every source (reconfigure_decoder) without changing what it decodes?
Introspection, then frames (PTS, shape, pixel sums) from a reused decoder against a fresh one per clip, over
codecs and resolutions, after a partial read, and what a bad source does; then what each set-up step costs."""

import faulthandler
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

import emopipe.io.nvdec as nvdec

faulthandler.enable(all_threads=True)
nvc = nvdec._pynvvideocodec()
clips = Path(sys.argv[1])
mode = sys.argv[2] if len(sys.argv) > 2 else "all"
RGB = nvc.OutputColorType.RGB


def threaded(path):
    return nvc.ThreadedDecoder(str(path), buffer_size=16, gpu_id=0, use_device_memory=True, output_color_type=RGB)


def read(decoder, limit=None):
    out = []
    while batch := decoder.get_batch_frames(16):
        for f in batch:
            t = torch.from_dlpack(f)
            out.append((int(f.getPTS()), tuple(t.shape), float(t.double().sum())))
        torch.cuda.synchronize()
        if limit is not None and len(out) >= limit:
            break
    return out


if mode == "bad":  # a subprocess: reconfigure a working decoder to a bad source
    decoder = threaded(clips / "a_720p_h264.mp4")
    read(decoder)
    try:
        decoder.reconfigure_decoder(str(clips / sys.argv[3]))
        got = read(decoder)
        print(f"bad {sys.argv[3]}: reconfigured, {len(got)} frames")
    except Exception as exc:
        print(f"bad {sys.argv[3]}: raised {type(exc).__name__}: {nvdec._reason(exc)}")
    try:
        decoder.reconfigure_decoder(str(clips / "c_480p_h264.mp4"))
        print(f"  after it, c: {len(read(decoder))} frames")
    except Exception as exc:
        print(f"  after it, c raised {type(exc).__name__}: {nvdec._reason(exc)}")
    decoder.end()
    sys.exit(0)

if mode == "all":
    print("PyNvVideoCodec", getattr(nvc, "__version__", "?"))
    print("module:", [n for n in dir(nvc) if not n.startswith("_")])
    d = threaded(clips / "a_720p_h264.mp4")
    print("ThreadedDecoder:", [n for n in dir(d) if not n.startswith("_")])
    print("reconfigure_decoder doc:", (type(d).reconfigure_decoder.__doc__ or "").strip()[:800])
    print(
        "metadata:",
        {k: getattr(d.get_stream_metadata(), k) for k in dir(d.get_stream_metadata()) if not k.startswith("_")},
    )
    d.end()
    dm = nvc.CreateDemuxer(str(clips / "a_720p_h264.mp4"))
    print("demuxer:", [n for n in dir(dm) if not n.startswith("_")])
    for name in dir(dm):
        if name[0].isupper() and name.startswith(
            ("Width", "Height", "Chroma", "Bit", "GetNv", "Codec", "Frame", "Get")
        ):
            try:
                print(f"  {name}() = {getattr(dm, name)()}")
            except Exception as exc:
                print(f"  {name}() raised {exc!r}"[:200])
    del dm

    names = [
        "a_720p_h264.mp4",
        "b_1080p_h264.mp4",
        "c_480p_h264.mp4",
        "d_720p_hevc.mp4",
        "e_4k_h264.mp4",
        "g_720p_hevc10.mp4",
        "h_720p_vp9.webm",
        "i_720p_mpeg4.mp4",
    ]
    reference = {}
    for name in names:
        dec = threaded(clips / name)
        reference[name] = read(dec)
        dec.end()
        print(f"fresh {name}: {len(reference[name])} frames, shape {reference[name][0][1]}")

    sequence = [
        "a_720p_h264.mp4",
        "b_1080p_h264.mp4",
        "c_480p_h264.mp4",
        "e_4k_h264.mp4",
        "a_720p_h264.mp4",
        "d_720p_hevc.mp4",
        "a_720p_h264.mp4",
        "h_720p_vp9.webm",
        "i_720p_mpeg4.mp4",
        "c_480p_h264.mp4",
        "b_1080p_h264.mp4",
    ]
    dec = None
    for name in sequence:
        try:
            if dec is None:
                dec = threaded(clips / name)
            else:
                dec.reconfigure_decoder(str(clips / name))
            got = read(dec)
            print(f"reused {name}: {'same' if got == reference[name] else 'DIFFERENT'} ({len(got)} frames)")
            if got != reference[name]:
                bad = (
                    next(i for i, (x, y) in enumerate(zip(got, reference[name])) if x != y)
                    if got and reference[name]
                    else 0
                )
                print("   first difference at", bad, got[bad : bad + 1], reference[name][bad : bad + 1])
        except Exception as exc:
            print(f"reused {name}: raised {type(exc).__name__}: {nvdec._reason(exc)}")
    # partial reads, then another source
    for first, second in [
        ("a_720p_h264.mp4", "b_1080p_h264.mp4"),
        ("b_1080p_h264.mp4", "a_720p_h264.mp4"),
        ("d_720p_hevc.mp4", "a_720p_h264.mp4"),
        ("a_720p_h264.mp4", "a_720p_h264.mp4"),
    ]:
        dec.reconfigure_decoder(str(clips / first))
        part = read(dec, limit=20)
        dec.reconfigure_decoder(str(clips / second))
        got = read(dec)
        print(
            f"partial {first} ({len(part)}, {'same' if part == reference[first][: len(part)] else 'DIFFERENT'}) then "
            f"{second}: {'same' if got == reference[second] else 'DIFFERENT'} ({len(got)} frames)"
        )
    dec.end()
    ten = threaded(clips / "g_720p_hevc10.mp4")
    read(ten)
    ten.reconfigure_decoder(str(clips / "g_720p_hevc10.mp4"))
    print(f"10-bit reused for 10-bit: {'same' if read(ten) == reference['g_720p_hevc10.mp4'] else 'DIFFERENT'}")
    ten.end()

    for bad in ["f_444_h264.mp4", "missing.mp4", "text.mp4", "g_720p_hevc10.mp4"]:
        try:
            r = subprocess.run(
                [sys.executable, __file__, str(clips), "bad", bad], capture_output=True, text=True, timeout=20
            )
            print(f"subprocess {bad}: rc {r.returncode}; {r.stdout.strip()} {r.stderr.strip()[-300:]}")
        except subprocess.TimeoutExpired:
            print(f"subprocess {bad}: still running after 20 s (killed)")


def median_ms(fn, n=15):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


clip = clips / "a_720p_h264.mp4"
print(f"demuxer: {median_ms(lambda: nvc.CreateDemuxer(str(clip))):.1f} ms")


def probe():
    p = nvc.SimpleDecoder(str(clip), gpu_id=0, use_device_memory=True, output_color_type=RGB)
    p.get_batch_frames(1)
    del p


print(f"simple probe (create + 1 frame + drop): {median_ms(probe):.1f} ms")


def fresh_first():
    x = threaded(clip)
    x.get_batch_frames(16)
    x.end()


print(f"threaded create + first 16 + end: {median_ms(fresh_first):.1f} ms")
keep = threaded(clip)


def reused_first():
    keep.reconfigure_decoder(str(clip))
    keep.get_batch_frames(16)


print(f"reconfigure + first 16: {median_ms(reused_first):.1f} ms")
# (As run, the caps lines here passed keywords GetDecoderCaps does not take and stopped the script; nvpool2.py asks
# for the capabilities with positional arguments.)
print(f"rotation probe (OpenCV open): {median_ms(lambda: nvdec._clockwise_quarter_turns(clip)):.1f} ms")
keep.end()
