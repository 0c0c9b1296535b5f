"""make bench's GPU section (issue 31): long inputs on a CUDA device, against the model's own forward pass.

    SmolLM2 (its configuration; the bundled weights where installed)   float32     2,048 and 8,192 tokens
    a Llama-3.2-1B-shaped model with random weights                    bfloat16    16,384 and 32,768 tokens

Per row: attend() (the forward pass with capture: the model's own fused kernel, q, k, v and the hidden states
kept on the GPU in its dtype), the grid on screen (the survey, then the all-heads grid figure as the page sends
it), the views after it (a head's zoom, the mean over heads, a query's row, attention by distance), the model's
own forward pass (sdpa, nothing captured, the next token's logits only), the peak GPU memory of each, and what
the result keeps in the process's memory.
Timings synchronise the device; medians of 3 after a warm-up call (common.timed).

    python -m benchmarks.gpu OUT.json     (ATTENTION_EXPLORER_DEVICE=cuda is set for the run)

Runs only where torch.cuda.is_available(); benchmarks.run says so in docs/benchmarks.md otherwise.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from attention.models import attend

os.environ.setdefault("ATTENTION_EXPLORER_DEVICE", "cuda")

# Llama-3.2-1B's configuration (its config.json, as published), to build a model of its shape with random
# weights: no download, the same arithmetic per token.
LLAMA_32_1B = dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=64, vocab_size=128256, max_position_embeddings=131072,
                   rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu",
                   rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192},
                   bos_token_id=1, eos_token_id=2)


def random_model(config_kwargs: dict, folder: Path, dtype, tokenizer) -> Path:
    """A Llama of `config_kwargs`' shape with random weights, saved in `dtype` with `tokenizer` in `folder`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**config_kwargs, dtype=str(dtype).removeprefix("torch."))
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    return folder


def synced(fn):
    import torch

    def run():
        out = fn()
        torch.cuda.synchronize()
        return out
    return run


def _peak(fn) -> float:
    """Peak GPU memory (GB) allocated while fn() runs, above what was allocated before it."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 1e9


def measure(loaded, n: int, repeats: int = 3) -> dict:
    """One row: attend(), the grid on screen and the model's own forward pass on a text of n tokens."""
    import torch

    from attention import figures
    from attention.models import CAPTURE, survey
    from benchmarks.common import text_of_tokens, timed

    text = text_of_tokens(loaded.tokenizer, n)
    ids = loaded.tokenizer(text, return_tensors="pt")["input_ids"].to(loaded.device)

    def grid(att):
        found = survey(att)
        return figures.head_grid(found.tiles, hover_extra=found.special_mass,
                                 hover_label="on the first/special tokens").to_json()

    row = {"n": int(ids.shape[1]), "dtype": str(next(loaded.network.parameters()).dtype).removeprefix("torch.")}
    attend_runs, grid_runs = [], []
    grid(attend(loaded, text))  # warm-up
    peak_attend = None
    for _ in range(repeats):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        t = time.perf_counter()
        att = attend(loaded, text)
        torch.cuda.synchronize()
        attend_runs.append(time.perf_counter() - t)
        peak_attend = (torch.cuda.max_memory_allocated() - before) / 1e9
        row["survey_in_pass"] = att.self_attn.derived.survey is not None  # our kernel summed it as it went
        t = time.perf_counter()
        grid(att)
        torch.cuda.synchronize()
        grid_runs.append(time.perf_counter() - t)
        for name, view in views(att).items():
            t = time.perf_counter()
            view()
            torch.cuda.synchronize()
            row.setdefault("views", {}).setdefault(name, []).append(time.perf_counter() - t)
        row["stored_gb"] = att.nbytes / 1e9  # the survey included
        row["host_gb"] = att.host_nbytes / 1e9  # of it, in the process's memory (the rest stays on the GPU)
        del att
    row["views"] = {name: _stats(runs) for name, runs in row["views"].items()}
    row["attend"] = _stats(attend_runs)
    row["grid"] = _stats(grid_runs)
    row["attend_peak_gb"] = peak_attend
    extra = {"logits_to_keep": 1}
    network = loaded.network
    network.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            own = synced(lambda: network(input_ids=ids, use_cache=False, **extra))
            row["own"] = timed(own, repeats)
            row["own_peak_gb"] = _peak(own)
    finally:
        network.set_attn_implementation(CAPTURE)
    row["attend_over_own"] = row["attend"]["median"] / row["own"]["median"]
    row["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return row


def views(att) -> dict:
    """The views of a long result a page shows after the grid, each made on the device: a head's zoom (block
    maxima), the mean over heads, a query's row, attention by distance (a lookup in the survey)."""
    from attention.models import query_row, survey, zoom

    last, n = att.n_layers - 1, len(att.tokens)
    return {"zoom": lambda: zoom(att, "head", layer=last, head=0),
            "mean": lambda: zoom(att, "mean", layer=last),
            "row": lambda: query_row(att, n - 1, layer=last),
            "distance": lambda: survey(att).distance_profile()}


def _stats(runs: list[float]) -> dict:
    import statistics

    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "n": len(runs)}


def main(out: Path, smoke: bool = False) -> dict:
    import torch

    from attention.models import load_model

    result = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "rows": [],
              "torch": torch.__version__}
    if not torch.cuda.is_available():
        out.write_text(json.dumps(result))
        return result

    def save():
        out.write_text(json.dumps(result, indent=1))

    plan = [("SmolLM2-135M", None, "float32", (512,) if smoke else (2048, 8192)),
            ("Llama-3.2-1B shape, random weights", LLAMA_32_1B, "bfloat16", (512,) if smoke else (16384, 32768))]
    smollm2 = load_model("smollm2")
    for label, shape, dtype, sizes in plan:
        with tempfile.TemporaryDirectory() as folder:
            t = time.perf_counter()
            if shape is None:
                loaded = smollm2
            else:
                random_model(shape, Path(folder), getattr(torch, dtype), smollm2.tokenizer)
                loaded = load_model(folder, dtype=dtype)
            load_s = time.perf_counter() - t
            for n in sizes:
                try:
                    row = measure(loaded, n, repeats=1 if smoke else 3)
                except Exception as err:  # recorded: the next row still runs
                    row = {"n": n, "error": f"{type(err).__name__}: {str(err)[:500]}"}
                row.update(model=label, load_s=load_s, token_limit=loaded.spec.token_limit(loaded.device),
                           weights_gb=sum(p.numel() * p.element_size() for p in loaded.network.parameters()) / 1e9)
                result["rows"].append(row)
                save()
                print(json.dumps(row), flush=True)
            del loaded
            torch.cuda.empty_cache()
    return result


if __name__ == "__main__":
    main(Path(sys.argv[1]), smoke="--smoke" in sys.argv)
