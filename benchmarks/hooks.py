"""Hook points with TransformerLens's names (issue 61): run_with_cache and batch_patching against the forward passes
they need, on SmolLM2.

    python -m benchmarks.hooks            # measures, and writes section 14 of docs/benchmarks.md
    python -m benchmarks.hooks --smoke    # one run of each at the smallest sizes, nothing written

(a) run_with_cache keeping every hook point, and keeping one, against the network's plain forward pass (the call
run_with_cache makes, with no hook) on the same ids; and against that pass asked for its attention weights
(output_attentions=True, which run_with_cache asks for when a pattern is kept). Interleaved rounds in one
process, so the machine's load falls on every call alike. Target: every name within 1.3 x the plain pass.
(b) batch_patching over ioi_pairs(tokenizer, 100), every layer's residual stream at every position, against the
work it must do: its copies ran `block_tokens` (column, block) pairs, the work of block_tokens / L tokens through
every block, plus one pass over the clean and one over the corrupted prompts. "Needed" is that work timed as
plain passes of the network's body (no vocabulary-wide head: batch_patching reads two logits per copy) over the
same 100 prompts: t_body x (2 + block_tokens / (L x 100 x T)). Target: within 2 x. The naive count beside it:
every (row, position) patched by a full pass of the 100 prompts, (L + 1) x positions passes.
(c) TransformerLens's run_with_cache on the same ids, where it is importable (benchmarks.transformer_lens;
otherwise docs/transformer_lens.md has the figures from a separate venv).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from benchmarks.common import text_of_tokens
from benchmarks.soak import section_main

SECTION = "## 14. Hook points with TransformerLens's names (issue 61)"
PROMPT = "When Mary and John went to the store, John gave a drink to"
ONE = "blocks.15.hook_resid_post"


def _interleaved(calls: dict, rounds: int) -> dict:
    """{name: {median, min, max, n}} seconds, one call of each per round after one warm-up each."""
    for fn in calls.values():
        fn()
    runs: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            t = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - t)
    return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} for k, v in runs.items()}


def measure(smoke: bool = False) -> dict:
    import torch

    from attention.models import batch_patching, hook_names, ioi_pairs, load_model, run_with_cache
    from benchmarks import transformer_lens as tl_bench

    loaded = load_model("smollm2")
    rounds = 1 if smoke else 10
    r: dict = {"smoke": smoke, "names": len(hook_names(loaded)), "threads": tl_bench.THREADS, "cache": {}}
    texts = {"IOI prompt": PROMPT} if smoke else {"IOI prompt": PROMPT,
                                                  "256 tokens": text_of_tokens(loaded.tokenizer, 256, salt="hooks")}
    for label, text in texts.items():
        ids = tl_bench.ids_of(loaded, text)

        def plain(ids=ids, **extra):
            with torch.no_grad():
                loaded.network(input_ids=ids, use_cache=False, **extra)
        calls = {"plain": plain, "plain_weights": lambda: plain(output_attentions=True),
                 "every": lambda ids=ids: run_with_cache(loaded, ids),
                 "one": lambda ids=ids: run_with_cache(loaded, ids, names_filter=ONE)}
        before = torch.get_num_threads()
        torch.set_num_threads(tl_bench.THREADS)  # steadier than every core on a shared machine (as the TL timings)
        try:
            r["cache"][label] = {"tokens": int(ids.shape[1]), **_interleaved(calls, rounds)}
        finally:
            torch.set_num_threads(before)

    r["grads"] = _gradients(loaded, rounds)
    pairs = ioi_pairs(loaded.tokenizer, 2 if smoke else 100)
    corrupt = torch.cat([tl_bench.ids_of(loaded, p.corrupted) for p in pairs])  # IOI's template: one length
    B, T = corrupt.shape
    L = loaded.network.config.num_hidden_layers

    def body():  # every block over the batch, no vocabulary-wide head
        with torch.inference_mode():
            loaded.network.base_model(input_ids=corrupt, attention_mask=torch.ones_like(corrupt), use_cache=False)
    body_runs, patch_runs = [], []
    for _ in range(1 if smoke else 2):  # the floor timed before each run: the machine's load drifts
        before = torch.get_num_threads()
        torch.set_num_threads(max(before, os.cpu_count() or 1))  # every core, as batch_patching takes (work_threads)
        try:
            body()
            for _ in range(rounds):
                t = time.perf_counter()
                body()
                body_runs.append(time.perf_counter() - t)
        finally:
            torch.set_num_threads(before)
        found = batch_patching(loaded, pairs, positions="all")
        patch_runs.append(found.seconds)
    t_body = {"median": statistics.median(body_runs), "min": min(body_runs), "max": max(body_runs),
              "n": len(body_runs)}
    r["patching"] = {"pairs": B, "T": T, "L": L, "runs": found.runs, "tokens": found.tokens,
                     "block_tokens": found.block_tokens, "positions": len(found.positions),
                     "seconds": {"median": statistics.median(patch_runs), "min": min(patch_runs),
                                 "max": max(patch_runs), "n": len(patch_runs)}, "body": t_body}
    if tl_bench.available() is None and not smoke:
        tl = tl_bench.tl_model(loaded)
        ids = tl_bench.ids_of(loaded, PROMPT)
        r["tl"] = tl_bench.timings(loaded, tl, ids)
    else:
        r["tl_skipped"] = tl_bench.available() or "smoke run"
    r["one_name"] = ONE
    return r


def _gradients(loaded, rounds: int) -> dict:
    """(d) A cache with every point's gradient, and attribution patching of all heads on a metric, against the plain
    forward pass and a forward + backward pass (to the embedding's output) on the IOI prompt."""
    import torch

    from attention.models import attend, attribution_patching, run_with_cache, to_single_token
    from benchmarks import transformer_lens as tl_bench

    ids = tl_bench.ids_of(loaded, PROMPT)
    mary, john = to_single_token(loaded, " Mary"), to_single_token(loaded, " John")
    att = attend(loaded, PROMPT)

    def metric(logits):
        return logits[0, -1, mary] - logits[0, -1, john]

    def plain():
        with torch.no_grad():
            loaded.network(input_ids=ids, use_cache=False)

    def forward_backward():  # the floor: one pass with a graph from the embedding on, and its backward
        embeds = loaded.network.get_input_embeddings()(ids).detach().requires_grad_(True)
        logits = loaded.network(inputs_embeds=embeds, use_cache=False).logits
        torch.autograd.backward(metric(logits), inputs=[embeds])
    calls = {"plain": plain, "forward_backward": forward_backward,
             "cache_grads": lambda: run_with_cache(loaded, ids, incl_bwd=True, metric=metric),
             "attribution": lambda: attribution_patching(loaded, att, metric=metric)}
    before = torch.get_num_threads()
    torch.set_num_threads(tl_bench.THREADS)
    try:
        config = loaded.network.config
        return {"tokens": int(ids.shape[1]), "heads": config.num_hidden_layers * config.num_attention_heads,
                **_interleaved(calls, rounds)}
    finally:
        torch.set_num_threads(before)


def _ms(t: dict) -> str:
    return f"{t['median'] * 1e3:.1f} ms ({t['min'] * 1e3:.1f}–{t['max'] * 1e3:.1f}, n={t['n']})"


def _s(t: dict) -> str:
    return f"{t['median']:.2f} s ({t['min']:.2f}–{t['max']:.2f}, n={t['n']})"


def lines(r: dict) -> list[str]:
    out = [SECTION, "",
           f"SmolLM2 ({r['names']} hook points), `python -m benchmarks.hooks`; (a) and (c) on {r['threads']} torch "
           "thread, (b) on the threads batch_patching takes (every core), its floor too. Every "
           "ratio is of two medians from interleaved rounds in one process (the 2 shared cores are noisy: min–max "
           "shown).", "",
           "(a) run_with_cache against the network's plain forward pass on the same ids (the call run_with_cache "
           "makes, no hook). Target: ≤ 1.3 x.", "",
           "| text | tokens | plain pass | plain pass, output_attentions | every name | ÷ plain | "
           f"one name ({r['one_name']}) | ÷ plain | met |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for label, c in r["cache"].items():
        p = c["plain"]["median"]
        every, one = c["every"]["median"] / p, c["one"]["median"] / p
        out.append(f"| {label} | {c['tokens']} | {_ms(c['plain'])} | {_ms(c['plain_weights'])} | {_ms(c['every'])} | "
                   f"{every:.2f} x | {_ms(c['one'])} | {one:.2f} x | "
                   f"{'yes' if max(every, one) <= 1.3 else '**no**'} |")
    x = r["patching"]
    body = x["body"]["median"]
    needed = body * (2 + x["block_tokens"] / (x["L"] * x["pairs"] * x["T"]))
    naive = body * (2 + (x["L"] + 1) * x["positions"])
    ratio = x["seconds"]["median"] / needed
    out += ["", f"(b) batch_patching over ioi_pairs(tokenizer, {x['pairs']}) ({x['T']} tokens each), every layer's "
            f"residual stream ({x['L'] + 1} rows) at every one of {x['positions']} positions: {x['runs']:,} patched "
            f"copies, {x['tokens']:,} columns, {x['block_tokens']:,} (column, block) pairs = the work of "
            f"{x['block_tokens'] / x['L']:,.0f} tokens through all {x['L']} blocks, "
            f"{x['block_tokens'] / (x['L'] * x['pairs'] * x['T']):.1f} passes of the {x['pairs']} prompts. "
            f"One pass of the network's body over the {x['pairs']} prompts: {_ms(x['body'])}. Target: ≤ 2 x the "
            "work it needs.", "",
            "| batch_patching | needed: (2 + that many passes) x the body's pass | ÷ needed | met | "
            "a full pass per (row, position) | ÷ that |", "| --- | --- | --- | --- | --- | --- |",
            f"| {_s(x['seconds'])} | {needed:.2f} s | {ratio:.2f} x | {'yes' if ratio <= 2 else '**no**'} | "
            f"{naive:.1f} s | {x['seconds']['median'] / naive:.3f} x |"]
    if "grads" in r:
        g = r["grads"]
        grads = g["cache_grads"]["median"] / g["plain"]["median"]
        attr = g["attribution"]["median"] / g["forward_backward"]["median"]
        out += ["", f"(d) Gradients (issue 72) on the IOI prompt ({g['tokens']} tokens): run_with_cache(..., "
                "incl_bwd=True) keeping every point and its gradient, against the plain forward pass (target ≤ 3 x); "
                f"attribution_patching of all {g['heads']} heads on a metric of one's own, against one forward "
                "and backward pass to the embedding (target ≤ 3 x).", "",
                "| call | time | ÷ its floor | met |", "| --- | --- | --- | --- |",
                f"| plain forward pass | {_ms(g['plain'])} | | |",
                f"| forward + backward | {_ms(g['forward_backward'])} | | |",
                f"| cache with every gradient | {_ms(g['cache_grads'])} | {grads:.2f} x the plain pass | "
                f"{'yes' if grads <= 3 else '**no**'} |",
                f"| attribution patching, every head | {_ms(g['attribution'])} | {attr:.2f} x forward + backward | "
                f"{'yes' if attr <= 3 else '**no**'} |"]
    if "tl" in r:
        t = r["tl"]
        base = t["own forward (transformers)"]["median"]
        out += ["", "(c) TransformerLens 3.9 on the same weights and ids (the IOI prompt), same rounds:", "",
                "| call | time | ÷ the model's own forward pass |", "| --- | --- | --- |"]
        out += [f"| {k} | {_ms(v)} | {v['median'] / base:.2f} x |" for k, v in t.items()]
    else:
        out += ["", f"(c) TransformerLens: not measured here ({r['tl_skipped']}). docs/transformer_lens.md has its "
                "run_with_cache against ours and the model's own pass, measured from a separate venv."]
    return out


def main(argv: list[str] | None = None) -> int:
    return section_main(argv, measure, lines, SECTION, __doc__)


if __name__ == "__main__":
    sys.exit(main())
