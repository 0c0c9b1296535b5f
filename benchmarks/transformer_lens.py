"""Our hook points against TransformerLens 3.9 on SmolLM2: the same weights, every name both give, and the time of
run_with_cache on each side (issue 61).

    python -m benchmarks.transformer_lens      # prints the tables (docs/transformer_lens.md holds a run of them)

TransformerLens is not one of the project's requirements (docs/transformer_lens.md says why): without it this
prints why it skipped and exits 0, so `make bench` runs it either way. Run it from a venv that has it:

    python3 -m venv /tmp/tl && /tmp/tl/bin/pip install torch==2.13.0 transformers==5.23.0 transformer-lens==3.9.0
    /tmp/tl/bin/pip install --no-deps --no-build-isolation -e . && /tmp/tl/bin/python -m benchmarks.transformer_lens

TransformerLens's model is built from the bundled model's own weights (convert_llama_weights on `loaded.network`)
with a hand-made HookedTransformerConfig, loaded unfolded (fold_ln, center_writing_weights, center_unembed,
fold_value_biases all False) so that its activations are the model's own. A second copy loaded with TL's defaults
(fold_ln=True, ...) shows which names those defaults change. Times: medians (min–max) of interleaved rounds in
this one process, torch's threads as set (2 cores here: noisy; read the ratios).
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import statistics
import sys
import time

PROMPTS = ("When Mary and John went to the store, John gave a drink to", "The capital of France is")
LONG_TOKENS = 128  # one more prompt of this many tokens (benchmarks.common.text_of_tokens)
ROUNDS = 10
THREADS = 1  # torch threads while timing: on a shared, oversubscribed machine one thread per call is the steadier
N_CTX = 1024  # TL keeps an n_ctx x n_ctx causal mask per layer: SmolLM2's 8,192 would be 2 GB of it


def available() -> str | None:
    """None when TransformerLens can be imported here, else why not."""
    if importlib.util.find_spec("transformer_lens") is None:
        return ("TransformerLens is not installed in this environment (it is kept out of the project's requirements: "
                "docs/transformer_lens.md); install it in a separate venv to run this comparison")
    return None


def tl_model(loaded, *, folded: bool = False):
    """A HookedTransformer holding SmolLM2's weights (from `loaded.network`, a LlamaForCausalLM); unfolded unless
    `folded` (TL's from_pretrained defaults)."""
    import torch
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.llama import convert_llama_weights

    c = loaded.network.config
    theta = (getattr(c, "rope_parameters", None) or {}).get("rope_theta") or getattr(c, "rope_theta", 10000.0)
    cfg = HookedTransformerConfig(
        d_model=c.hidden_size, d_head=c.head_dim, n_heads=c.num_attention_heads, d_mlp=c.intermediate_size,
        n_layers=c.num_hidden_layers, n_ctx=N_CTX, eps=c.rms_norm_eps, d_vocab=c.vocab_size, act_fn=c.hidden_act,
        n_key_value_heads=c.num_key_value_heads if c.num_key_value_heads != c.num_attention_heads else None,
        normalization_type="RMS", positional_embedding_type="rotary", rotary_adjacent_pairs=False,
        rotary_dim=c.head_dim, rotary_base=theta, final_rms=True, gated_mlp=True, dtype=torch.float32,
        device="cpu", default_prepend_bos=False, original_architecture="LlamaForCausalLM")
    model = HookedTransformer(cfg)
    with torch.no_grad():
        state = {k: v.detach().clone() for k, v in convert_llama_weights(loaded.network, cfg).items()}
    model.load_and_process_state_dict(state, fold_ln=folded, center_writing_weights=folded, center_unembed=folded,
                                      fold_value_biases=folded)
    return model.eval()


def kind(name: str) -> str:
    """A hook name without its layer: "blocks.3.attn.hook_q" -> "attn.hook_q"."""
    return re.sub(r"^blocks\.\d+\.", "", name)


def ids_of(loaded, text: str):
    """(1, pos) token ids of one text, as run_with_cache tokenizes it (the tokenizer's own special tokens)."""
    return loaded.tokenizer(text, return_tensors="pt")["input_ids"].to(loaded.device)


def prompts(loaded) -> list:
    from benchmarks.common import text_of_tokens

    texts = [*PROMPTS, text_of_tokens(loaded.tokenizer, LONG_TOKENS, salt="lens")]
    return [ids_of(loaded, t) for t in texts]


def compare(loaded, tl, tl_folded, ids_list) -> dict:
    """Per name kind: max |ours − TL| over every layer and prompt, the largest |value| there, the worst layer; the
    names only one side has; shapes that differ; logits; ln_final against TL's own scaled by its weight."""
    import torch

    from attention.models import run_with_cache

    rows: dict[str, dict] = {}
    only_ours, shapes = set(), {}
    extra: dict[str, float] = {}
    for ids in ids_list:
        logits, ours = run_with_cache(loaded, ids)
        with torch.no_grad():
            tl_logits, theirs = tl.run_with_cache(ids)
            _, folded = tl_folded.run_with_cache(ids, names_filter=lambda n: n == "ln_final.hook_normalized")
        extra["logits"] = max(extra.get("logits", 0.0), float((logits - tl_logits).abs().max()))
        extra["logits_mag"] = max(extra.get("logits_mag", 0.0), float(logits.abs().max()))
        tl_names = set(theirs.keys())
        only_ours |= set(ours) - tl_names
        for name in ours:
            if name not in tl_names:
                continue
            a, b = ours[name], theirs[name]
            if name.endswith("hook_attn_scores"):  # TL's masked keys hold -inf, ours the dtype's lowest number
                masked = torch.isinf(b)
                extra["scores_mask_agrees"] = extra.get("scores_mask_agrees", True) and bool(
                    torch.equal(masked, a < -1e30))
                a, b = a.masked_fill(masked, 0), b.masked_fill(masked, 0)
            if a.shape != b.shape:
                shapes[name] = (tuple(a.shape), tuple(b.shape))
                continue
            gap, mag = float((a - b).abs().max()), float(a.abs().max())
            row = rows.setdefault(kind(name), {"gap": 0.0, "mag": 0.0, "layer": None, "names": set()})
            row["names"].add(name)
            row["mag"] = max(row["mag"], mag)
            if gap >= row["gap"]:
                row["gap"], row["layer"] = gap, re.match(r"blocks\.(\d+)\.", name) and int(name.split(".")[1])
        w = tl.ln_final.w.detach()
        final, tl_final = ours["ln_final.hook_normalized"], theirs["ln_final.hook_normalized"]
        extra["final_times_w"] = max(extra.get("final_times_w", 0.0), float((final - tl_final * w).abs().max()))
        extra["final_folded"] = max(extra.get("final_folded", 0.0),
                                    float((final - folded["ln_final.hook_normalized"]).abs().max()))
        extra["final_folded_times_w"] = max(extra.get("final_folded_times_w", 0.0), float(
            (final - folded["ln_final.hook_normalized"] * w).abs().max()))
        only_tl = sorted({kind(n) for n in tl_names - set(ours)})
    return {"rows": rows, "only_ours": sorted(only_ours), "only_tl": only_tl, "shapes": shapes, "extra": extra,
            "tokens": [int(ids.shape[1]) for ids in ids_list], "tl_count": len(tl_names), "our_count": len(ours)}


def timings(loaded, tl, ids, rounds: int = ROUNDS) -> dict:
    """Interleaved rounds, one call of each per round: the model's own forward pass (transformers, as loaded),
    ours run_with_cache (every name), TL's forward, TL's run_with_cache (every TL name, and only the names we
    share). Seconds, {name: {median, min, max, n}}."""
    import torch

    from attention.models import hook_names, run_with_cache

    ours_names = set(hook_names(loaded))
    shared = [n for n in tl.hook_dict if n in ours_names]

    def own():
        with torch.no_grad():
            loaded.network(input_ids=ids, use_cache=False)

    def tl_forward():
        with torch.no_grad():
            tl(ids)

    def tl_cache_shared():
        with torch.no_grad():
            tl.run_with_cache(ids, names_filter=shared)

    def tl_cache():
        with torch.no_grad():
            tl.run_with_cache(ids)

    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    calls = {"own forward (transformers)": own, "ours run_with_cache (every name)": lambda: run_with_cache(loaded, ids),
             "TL forward": tl_forward, "TL run_with_cache (our names)": tl_cache_shared,
             "TL run_with_cache (every name)": tl_cache}
    runs: dict[str, list[float]] = {k: [] for k in calls}
    try:
        for fn in calls.values():  # warm-up
            fn()
        for _ in range(rounds):
            for name, fn in calls.items():
                t = time.perf_counter()
                fn()
                runs[name].append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(before)
    return {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} for k, v in runs.items()}


DETECT_TEXT = "The cat sat on the mat. The dog sat on the rug. The cat sat on the mat again, and the dog slept."


def detect_heads(loaded, tl) -> dict[str, float]:
    """Our detect_head against TransformerLens's on the same text and weights, every detection pattern and option:
    {"pattern, options": max |ours - TL| over every head}."""
    from transformer_lens.head_detector import detect_head as tl_detect

    from attention.models import detect_head

    if tl.tokenizer is None:  # TL's detect_head reads a text through the model's tokenizer
        tl.set_tokenizer(loaded.tokenizer, default_padding_side="right")
    gaps = {}
    for name in ("previous_token_head", "duplicate_token_head", "induction_head"):
        for bos, current, measure in itertools.product((False, True), (False, True), ("mul", "abs")):
            options = {"exclude_bos": bos, "exclude_current_token": current, "error_measure": measure}
            theirs = tl_detect(tl, DETECT_TEXT, name, **options).numpy()
            ours = detect_head(loaded, DETECT_TEXT, name, prepend_bos=False, **options)  # TL's model: no BOS
            gaps[f"{name}, {bos}, {current}, {measure}"] = float(abs(ours - theirs).max())
    return gaps


def lines(c: dict, times: dict[int, dict]) -> list[str]:
    out = [f"Prompts of {', '.join(map(str, c['tokens']))} tokens; {c['our_count']} of our names, "
           f"{c['tl_count']} of TL's.", "",
           "| name (every layer) | max abs(ours − TL) | max abs(value) | ÷ | worst layer |",
           "| --- | --- | --- | --- | --- |"]
    for name, row in c["rows"].items():
        layer = "" if row["layer"] is None else row["layer"]
        out.append(f"| {name} | {row['gap']:.1e} | {row['mag']:.3g} | {row['gap'] / row['mag']:.1e} | {layer} |")
    e = c["extra"]
    out += [f"| logits | {e['logits']:.1e} | {e['logits_mag']:.3g} | {e['logits'] / e['logits_mag']:.1e} | |", "",
            f"ln_final.hook_normalized: ours − TL's × ln_final.w {e['final_times_w']:.1e}; ours − TL folded "
            f"(fold_ln=True) {e['final_folded']:.1e}; ours − TL folded × w {e['final_folded_times_w']:.1e}.",
            "hook_attn_scores compared where TL's are finite; the masked keys agree (TL's -inf, ours below -1e30): "
            f"{e.get('scores_mask_agrees')}.",
            "Shapes that differ: " + ("; ".join(f"{n} ours {a} TL {b}" for n, (a, b) in c["shapes"].items())
                                      or "none") + ".",
            "Only ours: " + (", ".join(c["only_ours"]) or "none") + ".",
            "Only TL's (every layer): " + ", ".join(c["only_tl"]) + "."]
    for n, t in times.items():
        base = t["own forward (transformers)"]["median"]
        out += ["", f"Times at {n} tokens ({ROUNDS} interleaved rounds, {THREADS} torch thread, ms):", "",
                "| call | median (min–max) | ÷ own forward |", "| --- | --- | --- |"]
        out += [f"| {k} | {v['median'] * 1e3:.1f} ({v['min'] * 1e3:.1f}–{v['max'] * 1e3:.1f}) | "
                f"{v['median'] / base:.2f} |" for k, v in t.items()]
    return out


def main() -> int:
    why = available()
    if why:
        print(f"benchmarks.transformer_lens skipped: {why}")
        return 0
    import torch
    import transformer_lens

    from attention.models import load_model

    loaded = load_model("smollm2")
    t = time.perf_counter()
    tl, tl_folded = tl_model(loaded), tl_model(loaded, folded=True)
    built = time.perf_counter() - t
    ids_list = prompts(loaded)
    c = compare(loaded, tl, tl_folded, ids_list)
    del tl_folded
    times = {int(ids.shape[1]): timings(loaded, tl, ids) for ids in (ids_list[0], ids_list[2])}
    from importlib.metadata import version

    print(f"TransformerLens {version('transformer-lens')} ({transformer_lens.__name__}), torch {torch.__version__}, "
          f"transformers {version('transformers')}, {torch.get_num_threads()} torch threads; both TL models built "
          f"from the loaded weights in {built:.1f} s")
    print("\n".join(lines(c, times)))
    gaps = detect_heads(loaded, tl)
    print(f"\ndetect_head, ours against TL's on {DETECT_TEXT!r} (no BOS, as TL's model here), max |ours − TL| over "
          "every head:\n\n| pattern, exclude_bos, exclude_current_token, error_measure | max gap |\n| --- | --- |")
    print("\n".join(f"| {k} | {v:.1e} |" for k, v in gaps.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
