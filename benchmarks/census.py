"""The head census on the bundled decoders (issue 73): writes docs/heads.md (each model's report and the metrics'
table) and times the census against the plain forward passes of the probes it reads.

    python -m benchmarks.census            # SmolLM2 and Gemma 3: docs/heads.md, and the timing lines
    python -m benchmarks.census --smoke    # MiniLM only, nothing written

"Plain passes" are the network's own forward passes (no hook, no capture) over the same inputs the census reads:
the repeated-token probe's rows, the sink texts one by one, and the names and ordinal tokens one token each.
Target (issue 73): the whole census within 10 of them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("smollm2", "gemma3")
TARGET = 10.0  # census ÷ plain passes of its probes


def _plain_passes(loaded) -> float:
    """Seconds for the network's own forward passes over the census's inputs (module docstring)."""
    import torch

    from attention.models import probe_inputs

    inputs = probe_inputs(loaded)
    start = time.perf_counter()
    with torch.no_grad():
        for x in inputs:
            loaded.network(input_ids=x.to(loaded.device))
    return time.perf_counter() - start


def measure(models=MODELS, rounds: int = 2) -> dict:
    """{model: {"census": Census, "seconds": [...], "plain": [...]}}: the census and its plain passes, `rounds`
    times each, interleaved (the census is computed afresh each time)."""
    from attention.models import head_census, load_model

    out = {}
    for name in models:
        loaded = load_model(name)
        _plain_passes(loaded)  # warm-up
        seconds, plain, census = [], [], None
        for _ in range(rounds):
            plain.append(_plain_passes(loaded))
            start = time.perf_counter()
            census = head_census(loaded)
            seconds.append(time.perf_counter() - start)
        out[name] = {"census": census, "seconds": seconds, "plain": plain}
    return out


def lines(result: dict) -> list[str]:
    """The docs/benchmarks.md lines: each model's census time against its probes' plain passes."""
    rows = ["## The head census (issue 73)", "",
            "head_census on each model against the network's own forward passes over the same probes "
            f"(benchmarks/census.py says which), medians (min–max); target: within {TARGET:g} x.", "",
            "| model | census | plain passes of its probes | ratio | met |", "| --- | --- | --- | --- | --- |"]
    for name, r in result.items():
        c, p = statistics.median(r["seconds"]), statistics.median(r["plain"])
        rows.append(f"| {name} | {c:.1f} s ({min(r['seconds']):.1f}–{max(r['seconds']):.1f}) | {p:.2f} s "
                    f"({min(r['plain']):.2f}–{max(r['plain']):.2f}) | {c / p:.1f} x | "
                    f"{'yes' if c / p <= TARGET else '**no**'} |")
    return rows


def heads_md(result: dict) -> str:
    """docs/heads.md: what the census is, each model's report, and the metrics' table."""
    from attention.models import census_report, metrics_table

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = ["# The literature's heads in the bundled models (issue 73)", "",
             f"Written by `python -m benchmarks.census` (`make bench` runs it), {when}. `head_census(model)` "
             "(attention/models/analyses/census.py) scores every head by each metric below on that metric's own "
             "probe; the page *What each head is* shows the same for any model, with your text beside it. Layers "
             "and heads are named from 1 here (L19H7 is layer 19, head 7; arrays count from 0: [18, 6]).", "",
             "How the scores were checked: detect_head equals TransformerLens 3.9's on SmolLM2's weights for every "
             "pattern and option (docs/transformer_lens.md); every score equals an implementation written in "
             "tests/test_census.py from the paper on transformers' own attentions and weights, and scores 1.0 on "
             "a head made that kind by hand.", ""]
    for r in result.values():
        parts += census_report(r["census"]) + [""]
    parts += ["## What the papers report, beside these", "", *_beside_papers(result), "", "## The metrics", "",
              *metrics_table(), ""]
    return "\n".join(parts)


def _beside_papers(result: dict) -> list[str]:
    """The papers' findings, each beside what this run measured (the sentences read the census, not a hand)."""
    from attention.models import head_name

    out = []
    for name, r in result.items():
        c = r["census"]
        layer, head, score = c.top("prefix_matching", 1)[0]
        out.append(f"- Olsson et al. 2022 find induction heads in every model of two or more layers. {name}: the "
                   f"strongest prefix-matching head is {head_name(layer, head)} ({score:.3f}), "
                   f"{c.counts()['prefix_matching']} heads above 0.4"
                   + (" (the researcher of issue 72 ranked L19H7 first with their own TransformerLens-style "
                      "probe, 0.843)." if name == "smollm2" else "."))
        out.append(f"- Gu et al. 2024 find attention sinks on the first token in every model they studied, BOS "
                   f"or not. {name}: sink rate {c.sink_rate:.1%}.")
        if "name_copy" in c.scores:
            movers, suppress = (", ".join(str(layer + 1) for layer in sorted({int(x) for x in
                                                                             c.passed(k).nonzero()[0]}))
                                for k in ("name_copy", "negative_name_copy"))
            L = c.scores["name_copy"].shape[0]
            out.append(f"- Wang et al. 2022 find GPT-2 small's name movers at 9.6, 9.9 and 10.0 (layer.head from 0, "
                       f"of 12 layers), McDougall et al. 2023 its copy-suppression head at 10.7: late heads. "
                       f"{name}: name movers in layers {movers or 'none'}, copy suppression in layers "
                       f"{suppress or 'none'} (from 1, of {L}).")
        if "retrieval" in c.scores:
            L, H = c.scores["retrieval"].shape
            n = c.counts()["retrieval"]
            layer, head, score = c.top("retrieval", 1)[0]
            out.append(f"- Wu et al. 2024 find retrieval heads (score > 0.1) in every long-context model they "
                       f"studied, under 5 % of all heads. {name}: {n} of {L * H} ({n / (L * H):.1%}), the "
                       f"strongest {head_name(layer, head)} ({score:.3f}), on 9 prompts of up to 1,000 tokens.")
    out.append("- GPT-2 small (hub id `gpt2`) is not bundled, so the papers' own heads are not scored offline. "
               "Opened by its hub id, the census names them beside its scores (Census.published): induction 5.1, "
               "5.5, 6.9 (prefix matching); name movers 9.6, 9.9, 10.0 and copy suppression 10.7, whose OV scores "
               "are \"not scored\" there, since GPT-2 fuses q, k and v in one projection this package does not "
               "split yet.")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    result = measure(("minilm",) if args.smoke else MODELS, rounds=1 if args.smoke else 2)
    print("\n".join(lines(result)))
    if not args.smoke:
        (ROOT / "docs" / "heads.md").write_text(heads_md(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
