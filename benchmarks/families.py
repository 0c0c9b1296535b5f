"""docs/models.md: the table of model families x features, with each family's measured weight gap, written from
the tiny random-weight models of every family the app knows (tests/tiny_models.py, the family tests' fixtures)
and from the bundled models in each precision:

    .venv/bin/python -m benchmarks.families          # (make bench runs it too)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from attention.models import attend
from tests.tiny_models import EVERY, TEXT, build, own_attentions, tokenizer

ROOT = Path(__file__).resolve().parent.parent

REASONS = {  # a phrase of the message a page shows -> what the table says (the first phrase found)
    "families whose scores it splits": "family not in its list",
    "transformers' attention interface": "q, k, v not captured", "each head's values": "v not captured",
    "position bias": "position bias", "shared block": "one block for all layers",
    "encoder-decoder": "encoder-decoder", "no entry": "no anatomy entry", "normalises what each attention layer writes":
    "attention output normalised", "fused projection": "fused q, k, v", "predicts no next token": "no LM head",
    "same on both prompts": "no difference to restore", "head roles are measured": "encoder-decoder",
    "ALiBi": "ALiBi position bias", "disentangled": "disentangled positions", "interleaved": "interleaved rotary",
    "fuses q, k and v": "fused q, k, v", "not rebuilt exactly": "not exact", "not split here": "not split",
    "no plain rotary positions": "no plain rotary", "soft-caps its logits": "soft-capped logits",
    "no hook points": "no anatomy entry",
}


def _works(call) -> str:
    """"yes", or "no: " and the reason the page shows instead (shortened)."""
    try:
        call()
    except ValueError as err:
        message = str(err)
        return "no: " + next((short for phrase, short in REASONS.items() if phrase in message), message[:40])
    return "yes"


def _said(why: str | None) -> str:
    """A capability as the table writes it: "yes", or "no: " and the reason shortened as _works does."""
    return "yes" if why is None else "no: " + next((short for phrase, short in REASONS.items() if phrase in why),
                                                   why[:40])


def _gap(value: float) -> str:
    return "0" if value == 0 else f"{value:.0e}"


def _figure(value: float) -> str:
    return "0" if value == 0 else f"{value:.1e}"


def feature_row(name: str, tok) -> dict:
    """One row of docs/models.md: what was measured, and which features work, for one family."""
    from attention.models import (
        Reading,
        activation_patching,
        attribution_patching,
        capabilities,
        contrast,
        line_view,
        query_row,
        survey,
        swap_words,
        zoom,
    )
    loaded, reference = build(name, tok)
    att = attend(loaded, TEXT)
    gap = max(float(np.abs(att.weights[layer] - own).max()) for layer, own in enumerate(own_attentions(reference, att)))
    check = loaded.check
    reading = Reading(words=True, without_sinks=True)
    decoder = att.next_logits is not None
    row = {
        "family": name, "architecture": loaded.spec.architecture,
        "weights": "the model's own" if check.own_weights else "rebuilt from q, k",
        "gap": gap, "guard": check.gap, "tokens": loaded.spec.max_tokens,
        "views": _works(lambda: (zoom(att, "head", layer=0, reading=reading),
                                 query_row(att, 1, layer=0, reading=reading), line_view(att, 0, [0], reading=reading),
                                 survey(att))),
        "head step by step": _works(lambda: att.head_trace(0, 0, query=1)),
        "norm view": _works(lambda: zoom(att, "norm", layer=0)),
    }
    said = capabilities(loaded)  # the table's answers (tests/test_families.py holds them equal to a run of each)
    for feature in ("roles", "composition", "why this key", "generation", "head effects", "direct attribution",
                    "logit lens", "rotary view"):
        row[feature] = _said(said[feature])
    if decoder and said["head effects"] is None:
        pair = contrast(att, tok, " dog", " cat")
        corrupt = attend(loaded, swap_words(TEXT, "fox", "dog"))
        row["attribution patching"] = _works(lambda: attribution_patching(loaded, att, pair))
        row["activation patching"] = _works(lambda: activation_patching(loaded, att, corrupt, pair, site="heads"))
    elif decoder:
        row["attribution patching"] = row["activation patching"] = row["head effects"]
    else:
        row["attribution patching"] = "no: metric without slope"
        row["activation patching"] = "no: no LM head"
    return row


def write_table(rows: list[dict], n_tokens: int, path: Path = ROOT / "docs" / "models.md",
                bundled: list[dict] | None = None) -> None:
    columns = ["views", "head step by step", "norm view", "rotary view", "generation", "head effects",
               "attribution patching", "roles", "direct attribution", "logit lens", "activation patching",
               "composition", "why this key"]
    lines = [
        "# Model families: what is exact, what is shown",
        "",
        "Written by `python -m benchmarks.families` (and `make bench`) from tiny random-weight models of each family",
        "(tests/tiny_models.py), loaded through `attention.models.from_model` with the guard on, and compared with",
        f"the same weights run by transformers' eager attention on a {n_tokens}-token text longer than every "
        "attention window the configs use (4 tokens).",
        "",
        "- **gap**: the largest |our weight − the model's own| over every layer and head (the guard refuses a model",
        "  above 1e-4; **guard** is what it measured on its own probe when the model loaded).",
        "- **weights**: rebuilt from the captured q and k (any length: SmolLM2 reads 4,096 tokens), or the model's own",
        "  `output_attentions` for families whose scores carry a position bias (T5) or whose attention does not go",
        "  through transformers' attention interface (kept to 512 tokens, since all L × H × n² weights are held).",
        "- a feature marked **no** shows its reason on the page instead of a chart. For hook points, head effects,",
        "  roles, composition, why this key, generation, direct attribution, the logit lens and the rotary view the",
        "  answer is `attention.models.capabilities(model)`, read from the family's one entry in the anatomy",
        "  (attention/models/forward/anatomy.py: its parts, how heads write, what q and k read);",
        "  tests/test_families.py holds each answer equal to a run of the feature, reason word for word.",
        "- **granite, gpt_bigcode, gpt_bigcode_mha** have no entry in the anatomy's table: the guard reads their",
        "  parts from the module tree and keeps them only where a pass confirms them (anatomy_inferred: each head's",
        "  output is its pattern times its v, the blocks add exactly what attention and the MLP return, Granite's",
        "  writes scaled by 0.22 and logits by 1/8, and the LM head of the final norm gives the model's logits).",
        "- **how the guard measures** (attention.models.forward.guard): on a probe text longer than every attention",
        "  window, the model's own eager kernel is computed *beside* every layer of every stack, from the very q, k,",
        "  v and mask that layer has in the pass the pages show, while the pass goes on with its own outputs. So a",
        "  gap is our rebuilding alone, at every layer, not the drift between two passes: until issue 57 a second",
        "  pass ran three layers eagerly, and in 16 bits their rounded outputs changed every later layer's input",
        "  (SmolLM2 in float16 read 8.5e-3 at its last layer on an Intel Xeon and was refused; 1.2e-3 alone).",
        "  A refusal says its cause: the scores are not rebuilt (a gap above 1e-4 at a layer fed the same inputs:",
        "  the family and the first such layer), the dtype overflows (inf or NaN in the model's own pass: by which",
        "  layer, and which precision to choose), or our kernel's output differs from the model's own.",
        "- **half precision** (`load_model(..., dtype=\"bfloat16\" | \"float16\")`, or `from_model` on a model",
        "  already in it): weights are computed in float32 from the model's own q and k, while its eager kernel",
        "  rounds scores and weights to its dtype. Two references, each layer: our error is held to 1e-4 against",
        "  the model's eager kernel run on the same q, k, v and mask taken to float32 (its arithmetic without its",
        "  rounding: a scale 0.1 % off is refused in bfloat16 too), and the gap to its own eager weights in its",
        "  dtype (our error and its rounding) is stated beside 1e-4 + 16 unit roundoffs of the dtype (bfloat16:",
        "  0.063, float16: 0.0079), what its rounding of ordinary scores explains. Where a model's sharpest heads",
        "  go past that (scores of ~150 in bfloat16 move its weights by 0.15), it opens with a note: the weights",
        "  shown are exact for its q and k, its own are that far from them, and float32 makes them match.",
        "  The bundled models' figures in each precision are in the second table below; the tiny families'",
        "  0.0016-0.0044 and 0.0002-0.0006 (tests/test_dtypes.py). In half precision each layer's output is the",
        "  model's own kernel's (ours stands in only in float32). In the app: the Precision picker beside the model.",
        "- **memory** (attention.models.plan_memory, before any weight is read): the weights from the config on the",
        "  meta device × the dtype's bytes, plus per token of input q, k, v of every layer and the hidden states in",
        "  float32 and the pass's activations, plus the mask per pair of tokens, plus the largest tensor twice while",
        "  loading, against 80% of the memory available (or `ATTENTION_EXPLORER_MEMORY_GB`; on a GPU, its free",
        "  memory too, where q, k, v, the hidden states and the masks are counted in the model's dtype, since they",
        "  stay there, with the survey's buffers; the process's memory then holds the survey's sums alone). Too big",
        "  at 64 tokens: refused with the figures and the ways out. Otherwise the token limit",
        "  (**tokens** below, on this CPU) is the most that fits, at most the model's own and 4,096 on the CPU",
        "  (32,768 on a GPU); 512 where the model's own weights are kept. Estimate ÷ measured peak:",
        "  docs/benchmarks.md, section 9.",
        "- **split models** (`load_model(..., device_map=...)`, accelerate): every column above works with layers on",
        "  several GPUs, the CPU or disk (tests/test_memory.py on CPU + disk, tests/test_cuda.py on GPU + CPU + disk).",
        "- **why this key** (attention.models.qk_attribution) splits a score into (query part, key part) pairs; it is",
        "  shown only where the pairs add up to the model's own score: position biases (T5's, ALiBi), disentangled",
        "  attention (DeBERTa), one shared block (ALBERT), rotary applied inside the attention with interleaved pairs",
        "  (GPT-J), q, k, v fused per head (GPT-NeoX, ModernBERT) and encoder-decoders are refused with the reason.",
        "",
        "| family | architecture | weights | gap | guard | tokens | " + " | ".join(columns) + " |",
        "| --- " * (6 + len(columns)) + "|",
    ]
    for r in rows:
        cells = [r["family"], r["architecture"], r["weights"], _gap(r["gap"]), _gap(r["guard"]),
                 str(r["tokens"])] + [r[c] for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    if bundled:
        lines += [
            "",
            "## The bundled models in each precision",
            "",
            "What the guard measured when each bundled text model loaded on this CPU (its probe: the tokens below):",
            "**gap**, the largest |our weight − the model's own eager weight| over every layer, each layer fed the",
            "inputs it has in the pass shown, the layer where it is largest, the median layer's, and the allowance",
            "(in 16 bits, what the dtype's rounding explains); **our error**, against the same eager kernel run in",
            "float32 on the same inputs (in float32: the gap itself); the largest score the probe met.",
            "",
            "| model | precision | verdict | gap | at | median layer | allowance | our error | largest score "
            "| probe tokens |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in bundled:
            if "refused" in r:
                lines.append(f"| {r['model']} | {r['dtype']} | refused: {r['refused']} | | | | | | | |")
            else:
                exact = r["gap"] == 0
                cells = [r["model"], r["dtype"], "opens", _figure(r["gap"]), "every layer" if exact else r["at"],
                         _figure(r["median"]), f"{r['allowed']:.1e}", _figure(r["exact"]),
                         f"{r['top']:.0f}" if r["top"] else "", str(r["probe"])]
                lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


BUNDLED_TEXT = ("minilm", "smollm2", "gemma3")


def bundled_rows() -> list[dict]:
    """The guard's verdict on each bundled text model in each precision (docs/models.md's second table)."""
    from attention.models import ModelUnavailable, load_model

    rows = []
    for name in BUNDLED_TEXT:
        for dtype in ("float32", "bfloat16", "float16"):
            row = {"model": name, "dtype": dtype}
            try:
                check = load_model(name, dtype=dtype).check
            except ModelUnavailable as err:
                row["refused"] = str(err).split(" (", 1)[0]  # "Gemma-3-270M: its activations exceed ..."
            else:
                row.update(gap=check.gap, at=check.worst, median=float(np.median(check.layer_gaps)),
                           allowed=check.allowed, probe=check.probe_tokens, exact=check.exact_gap,
                           top=check.top_score)
            rows.append(row)
            print(f"{name:8s} {dtype:9s} " + (f"refused: {row['refused']}" if "refused" in row
                                              else f"gap {row['gap']:.1e} at {row['at']}"), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    given = argv if argv is not None else sys.argv[1:]
    names = given or list(EVERY)  # the table's families, then those read from their module trees
    tok = tokenizer()
    rows = []
    for name in names:
        rows.append(feature_row(name, tok))
        print(f"{name:11s} gap {rows[-1]['gap']:.1e}", flush=True)
    write_table(rows, len(tok(TEXT)["input_ids"]), bundled=None if given else bundled_rows())
    print(f"wrote {ROOT / 'docs' / 'models.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
