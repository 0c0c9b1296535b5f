"""Where the fused survey's time goes at 32,768 tokens (Llama-3.2-1B shape, bfloat16), on the device machine:
each kernel, variants with one part left out (made from the kernels' source: what each part costs), warps,
and the rest of the grid (finish_survey, the figure). Prints JSON lines.

    source .gpu/env.sh && python3 scripts/gpu/profile_survey.py [tokens] [--sweep]
"""

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ATTENTION_EXPLORER_DEVICE", "cuda")

import torch  # noqa: E402

from attention import figures  # noqa: E402
from attention.models import attend, load_model, survey  # noqa: E402
from attention.models.forward import fused_survey, head_survey  # noqa: E402
from attention.models.forward.survey_sums import SurveySums  # noqa: E402
from benchmarks import common  # noqa: E402
from benchmarks.gpu import LLAMA_32_1B, random_model, synced  # noqa: E402

SOURCE = Path(fused_survey.__file__).with_name("fused_survey_kernels.py").read_text()
LEAVE_OUT = {  # variant -> lines of _sums_step whose start is dropped (a statement may span lines: dropped whole)
    "no_column_mass": ("tl.atomic_add(COLUMN_MASS",),
    "no_band_sum": ("acc += w",),
}


def variant(name: str):
    lines, out, skipping = SOURCE.splitlines(), [], False
    for line in lines:
        stripped = line.strip()
        if any(stripped.startswith(p) for p in LEAVE_OUT[name]):
            skipping = stripped.count("(") > stripped.count(")")
            continue
        if skipping:
            skipping = not stripped.endswith(")") or stripped.count("(") >= stripped.count(")") + 1
            continue
        out.append(line)
    folder = Path(tempfile.mkdtemp())
    path = folder / f"kernels_{name}.py"
    path.write_text("\n".join(out) + "\n")
    spec = importlib.util.spec_from_file_location(f"kernels_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(fn, repeats=3) -> float:
    """Median seconds of fn() with the device synchronised (benchmarks.common.timed, benchmarks.gpu.synced)."""
    return round(common.timed(synced(fn), repeats)["median"], 4)


def main(n: int, sweep: bool):
    import triton

    smollm2 = load_model("smollm2")
    with tempfile.TemporaryDirectory() as folder:
        random_model(LLAMA_32_1B, Path(folder), torch.bfloat16, smollm2.tokenizer)
        loaded = load_model(folder, dtype="bfloat16")
        att = attend(loaded, common.text_of_tokens(loaded.tokenizer, n))
    s = att.self_attn
    L, H = s.n_layers, s.n_heads
    block = SurveySums(L, H, s.n_queries, s.n_keys).block
    print(json.dumps({"n": s.n_queries, "block": block, "triton": triton.__version__}), flush=True)
    one = lambda: fused_survey.layer_sums(s, 0, block, 0)  # noqa: E731
    row = {"layer_sums": timed(one)}
    kernels = fused_survey._triton()[1]
    for warps in ((4, 1) if sweep else ()):
        fused_survey.WARPS = warps
        row[f"sums_warps_{warps}"] = timed(one)
    fused_survey.WARPS = 2
    default = fused_survey.LSE_TILE, fused_survey.LSE_WARPS
    for tile, warps in (((128, 64), 4), ((128, 128), 8), ((64, 64), 2)) if sweep else ():
        fused_survey.LSE_TILE, fused_survey.LSE_WARPS = tile, warps
        row[f"lse_{tile[0]}x{tile[1]}_warps_{warps}"] = timed(one)
    fused_survey.LSE_TILE, fused_survey.LSE_WARPS = default
    for name in LEAVE_OUT if sweep else ():
        fused_survey._triton = (lambda m: (lambda: (triton, m)))(variant(name))
        row[name] = timed(one)
    fused_survey._triton = lambda: (triton, kernels)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        one()
        torch.cuda.synchronize()
    row["kernels_ms"] = {e.key[:60]: round(e.device_time_total / 1e3, 2) for e in
                         sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:8]}
    print(json.dumps(row), flush=True)

    def whole():
        s.derived.survey = None
        return survey(att)
    t_survey = timed(whole, 1)
    totals = SurveySums(L, H, s.n_queries, s.n_keys)
    for layer in range(L):
        totals.add_layer(layer, fused_survey.layer_sums(s, layer, block, 0))
    torch.cuda.synchronize()
    t = time.perf_counter()
    found = head_survey.finish_survey(att, totals)
    t_finish = time.perf_counter() - t
    t = time.perf_counter()
    figures.head_grid(found.tiles, hover_extra=found.special_mass, hover_label="on the first/special tokens").to_json()
    t_figure = time.perf_counter() - t
    print(json.dumps({"survey": t_survey, "finish_survey": round(t_finish, 4), "figure_json": round(t_figure, 4),
                      "layers": L}), flush=True)


if __name__ == "__main__":
    sizes = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(sizes[0]) if sizes else 32768, sweep="--sweep" in sys.argv)
