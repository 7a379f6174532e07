"""Session 30: each kept plan of a configuration read back in a fresh process (no PyTorch), its seconds and kind.
    python3 s30_plans.py PLAN_FOLDER KEY...
(As run on the GPU, only laid out for the linter afterwards: one statement a line, the imports in main.)"""
import sys
import time
from pathlib import Path


def main() -> None:
    from emopipe.model import cuda_context, cudnn_plans, early_plans

    folder, keys = Path(sys.argv[1]), sys.argv[2:]
    model = cuda_context.device_model(0)
    early_plans._load_wheel_libraries()
    sys.modules.setdefault("torch", None)  # type: ignore[arg-type]
    import cudnn

    cuda_context.make_current(0)
    handle = cudnn.create_handle()
    environment = cudnn_plans.environment(*model)
    recipes = early_plans.load_recipes()
    rows = []
    for key in keys:
        for recipe in recipes.get(key, ()):
            path = cudnn_plans.plan_file(folder, environment, recipe.signature)
            t = time.perf_counter()
            graph = cudnn_plans.read(handle, path)
            seconds = time.perf_counter() - t
            spec = recipe.spec
            kind = ("epilogue" if not isinstance(spec, cudnn_plans.ConvSpec) else
                    f"conv {spec.weight.dims} s{spec.stride[0]}" + (" bias" if spec.bias else "") +
                    (" residual" if spec.residual else "") + (" relu" if spec.relu else ""))
            kib = path.stat().st_size // 1024 if path.exists() else 0
            rows.append((key, kind, round(seconds * 1e3, 1), graph is not None, kib))
    by: dict[tuple[str, str], list[float]] = {}
    for key, kind, ms, _, _ in rows:
        group = (key, kind.split(" [")[0] if kind == "epilogue" else ("depthwise" if ", 1, 3, 3]" in kind else kind))
        by.setdefault(group, []).append(ms)
    for (key, kind), values in by.items():
        print(f"{key} | {kind}: {len(values)} plans, {sum(values):.1f} ms ({min(values)}-{max(values)})")
    print("total ms", round(sum(ms for _, _, ms, _, _ in rows), 1), "unread", sum(not ok for *_, ok, _ in rows))


if __name__ == "__main__":
    main()
