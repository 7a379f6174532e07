import importlib.util
import sys

import numpy as np

sys.path.insert(0, "/work/main")
from emopipe.io import records as new
from emopipe.types import FaceRecord

spec = importlib.util.spec_from_file_location("records_old", "/tmp/records_old.py")
old = importlib.util.module_from_spec(spec)
sys.modules["records_old"] = old
spec.loader.exec_module(old)
rng = np.random.default_rng(2)
LABELS = ("a", "b", "c", "d", "e", "f", "g", "h")
for trial in range(3000):
    n = int(rng.integers(1, 5))
    recs = []
    for i in range(n):
        p = rng.dirichlet(np.ones(8))
        x1, y1 = rng.uniform(0, 1000, 2) * (10.0 ** rng.integers(-3, 3))
        recs.append(
            FaceRecord.create(
                labels=LABELS,
                probabilities=p,
                source="s",
                frame=trial,
                timestamp_s=float(rng.uniform(0, 1e5)),
                track_id=1 + i,
                box=(x1, y1, x1 + rng.uniform(0, 300), y1 + rng.uniform(0, 300)),
                score=float(rng.uniform()),
                valence=float(rng.normal(0, 10.0 ** rng.integers(-4, 4))),
                arousal=float(rng.normal(0, 3)),
                landmarks=rng.uniform(0, 900, (68, 2)) if trial % 7 == 0 else None,
            )
        )
    a = new._columns_of(recs, trial % 7 == 0)
    b = old._columns_of(recs, trial % 7 == 0)
    assert a == b, trial
    assert all(type(x) is type(y) for k in a for x, y in zip(a[k], b[k])), trial
print("columns identical")
