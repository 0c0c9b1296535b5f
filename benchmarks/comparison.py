"""Two models compared head by head (issue 44), against the forward passes that make the two results.

    python -m benchmarks.comparison            # measures, and writes section 12 of docs/benchmarks.md
    python -m benchmarks.comparison --smoke    # one run of each, nothing written

SmolLM2 in float32 and in bfloat16 read one 512-token text: each forward pass (attend, the result the page
shows) is timed, then compare_results on the two results (every head, every row's Jensen-Shannon divergence),
one head pair as the page opens it, and the comparison's file. SmolLM2 against Gemma 3 is compared on words
(every head of A against every head of B) at 128 tokens. Medians with min-max, all from this one run.
"""

from __future__ import annotations

import sys

from attention.models import head_name
from benchmarks.common import text_of_tokens, timed
from benchmarks.soak import section_main

SECTION = "## 12. Two models compared head by head (issue 44)"


def measure(smoke: bool = False) -> dict:
    from attention.models import attend, compare_results, comparison_npz, head_pair, load_model

    repeats = 1 if smoke else 5
    f32, bf16 = load_model("smollm2", dtype="float32"), load_model("smollm2", dtype="bfloat16")
    text = text_of_tokens(f32.tokenizer, 32 if smoke else 512, salt="compare")
    a, b = attend(f32, text), attend(bf16, text)
    r = {"tokens": len(a.tokens), "heads": a.n_layers * a.n_heads,
         "forward_f32": timed(lambda: attend(f32, text), repeats),
         "forward_bf16": timed(lambda: attend(bf16, text), repeats),
         "compare": timed(lambda: compare_results(a, b), repeats)}
    cmp = compare_results(a, b)
    layer, head, top = cmp.largest(1)[0]
    r.update(top=head_name(layer, head), top_bits=top, median_bits=float(sorted(cmp.distance.ravel())[len(
        cmp.distance.ravel()) // 2]), pair=timed(lambda: head_pair(a, b, cmp, layer, head), repeats),
        save=timed(lambda: comparison_npz(a, b, cmp), repeats), file_mb=len(comparison_npz(a, b, cmp)) / 1e6)
    gemma = load_model("gemma3")
    words_text = text_of_tokens(f32.tokenizer, 32 if smoke else 128, salt="words")
    wa, wb = attend(f32, words_text), attend(gemma, words_text)
    r["words"] = {"words": len(compare_results(wa, wb).labels), "pairs": wa.n_layers * wa.n_heads * wb.n_layers
                  * wb.n_heads, "compare": timed(lambda: compare_results(wa, wb), 1 if smoke else 3),
                  "forward_gemma": timed(lambda: attend(gemma, words_text), 1 if smoke else 3)}
    return r


def _fig(t: dict) -> str:
    return f"{t['median']:.2f} s ({t['min']:.2f}–{t['max']:.2f}, n={t['n']})"


def lines(r: dict) -> list[str]:
    two = r["forward_f32"]["median"] + r["forward_bf16"]["median"]
    w = r["words"]
    words_ratio = w["compare"]["median"] / w["forward_gemma"]["median"]
    return [SECTION, "",
            f"SmolLM2 in float32 and in bfloat16, one text of {r['tokens']} tokens, all {r['heads']} heads (medians, "
            "min–max, one run; `python -m benchmarks.comparison`):", "",
            "| step | time | ÷ the two forward passes |", "| --- | --- | --- |",
            f"| forward pass, float32 (attend) | {_fig(r['forward_f32'])} | |",
            f"| forward pass, bfloat16 (attend) | {_fig(r['forward_bf16'])} | |",
            f"| compare_results: every head, every row's JSD | {_fig(r['compare'])} | "
            f"{r['compare']['median'] / two:.2f} |",
            f"| head_pair: one head opened beside B's, with B − A | {_fig(r['pair'])} | "
            f"{r['pair']['median'] / two:.3f} |",
            f"| comparison_npz: both results and the comparison in one file ({r['file_mb']:.1f} MB) | "
            f"{_fig(r['save'])} | {r['save']['median'] / two:.2f} |", "",
            f"The head that moved most in bfloat16: {r['top']} ({r['top_bits']:.2e} bits; the median head "
            f"{r['median_bits']:.2e}).", "",
            f"SmolLM2 against Gemma 3 on words ({w['words']} words, {w['pairs']:,} pairs of heads, every head of A "
            f"against every head of B): {_fig(w['compare'])}, {words_ratio:.1f} × Gemma 3's forward pass on the same "
            f"text ({_fig(w['forward_gemma'])})."]


def main(argv: list[str] | None = None) -> int:
    return section_main(argv, measure, lines, SECTION, __doc__)


if __name__ == "__main__":
    sys.exit(main())
