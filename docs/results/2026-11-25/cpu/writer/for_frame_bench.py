"""One frame's records: FaceRecord.for_frame against one FaceRecord.create per face (CPU, best of five)."""

import timeit

import numpy as np

from emopipe.types import FaceRecord

LABELS = ("neutral", "happy", "sad", "surprise", "fear", "disgust", "anger", "contempt")


def bench(k: int) -> None:
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(8), k)
    boxes = np.array([[10, 10, 50, 60]] * k, np.float32)
    scores = np.full(k, 0.9, np.float32)
    valence, arousal, ids = rng.normal(size=k), rng.normal(size=k), np.arange(1, k + 1)

    def together() -> list[FaceRecord]:
        return FaceRecord.for_frame(source="a", frame=3, timestamp_s=0.1, labels=LABELS, track_ids=ids, boxes=boxes,
                                    scores=scores, probabilities=probabilities, valence=valence, arousal=arousal)

    def one_by_one() -> list[FaceRecord]:
        return [FaceRecord.create(labels=LABELS, probabilities=probabilities[i], source="a", frame=3, timestamp_s=0.1,
                                  track_id=int(ids[i]), box=tuple(boxes[i]), score=float(scores[i]),
                                  valence=float(valence[i]), arousal=float(arousal[i])) for i in range(k)]

    for name, make in (("for_frame", together), ("create", one_by_one)):
        seconds = min(timeit.repeat(make, number=2000, repeat=5)) / 2000
        print(f"{k} face(s) {name} {seconds * 1e6:.1f} µs")


for faces in (1, 4):
    bench(faces)
