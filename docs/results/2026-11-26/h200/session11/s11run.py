"""Session 11: levers on one process's throughput, applied by patching before the command runs.
VARIANT: normal | null (RecordSink.write does nothing) | pack (keeps each frame's arrays only, what a sink feeding
another process would do in this one) | depthN (EmoNet batches collected N launches behind, not 1)."""
import sys

variant = sys.argv[1]
from emopipe.pipeline import runner, sinks  # noqa: E402

if variant == "null":
    sinks.RecordSink.write = lambda self, result: None
elif variant == "pack":
    def pack(self, result):
        faces = result.faces
        if not hasattr(self, "_packed"):
            self._packed = []
        self._packed.append((result.frame.index, result.frame.timestamp_s, result.detections.boxes,
                             result.detections.scores, [f.probabilities for f in faces],
                             [f.valence for f in faces], [f.arousal for f in faces], result.detected))
        if len(self._packed) >= 256:
            self._packed = []
    sinks.RecordSink.write = pack
elif variant.startswith("depth"):
    behind = int(variant[5:])

    def infer(self, batches, assembler):
        depth = behind if self.settings.overlap and not self.settings.live else 0
        for batch in batches:
            t = runner.time.perf_counter()
            pending = runner.launch(self.engine, batch.crops)
            self._inferring.append((batch, pending, runner.time.perf_counter() - t))
            while len(self._inferring) > depth:
                self._deliver_oldest(assembler)
    runner.Pipeline._infer = infer
from emopipe.cli.app import run_and_exit  # noqa: E402

run_and_exit(sys.argv[2:])
