"""What the demuxer, OpenCV and a decoded frame say of each clip's chroma format and bit depth."""
import sys
from pathlib import Path

import cv2
import torch

import emopipe.io.nvdec as nvdec

nvc = nvdec._pynvvideocodec()
for path in sorted(Path(sys.argv[1]).iterdir()):
    dm = nvc.CreateDemuxer(str(path))
    demux = (str(dm.GetNvCodecId()), str(dm.ChromaFormat()), dm.BitDepth(), dm.Width(), dm.Height())
    pkt = dm.Demux()
    after = (str(dm.ChromaFormat()), dm.BitDepth())
    del dm
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    code = int(cap.get(cv2.CAP_PROP_CODEC_PIXEL_FORMAT))
    fourcc = code.to_bytes(4, "little").decode("latin1") if code > 0 else code
    bits = cap.get(cv2.CAP_PROP_CODEC_EXTRADATA_INDEX) if hasattr(cv2, "CAP_PROP_CODEC_EXTRADATA_INDEX") else None
    cap.release()
    try:
        p = nvc.SimpleDecoder(str(path), gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGB)
        f = p.get_batch_frames(1)[0]
        t = torch.from_dlpack(f)
        frame = (tuple(t.shape), str(t.dtype), [a for a in dir(f) if not a.startswith("_")][:30])
        extra = {a: str(getattr(f, a)) for a in ("format", "colorspace", "bitdepth") if hasattr(f, a)}
        del p
    except Exception as exc:
        frame, extra = nvdec._reason(exc), {}
    print(f"{path.name}: demuxer {demux} after a packet {after}; opencv pixel format {fourcc!r}; frame {frame} {extra}",
          flush=True)
