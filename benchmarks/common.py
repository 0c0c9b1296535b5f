"""What every benchmark shares: timing a call (median, min and max) and texts of an exact token count.

Imported by benchmarks.compute, gpu, images and comparison (and by tests that need a text of n tokens); it
imports no other benchmark module, so none of them import each other in a circle.
"""

from __future__ import annotations

import os
import statistics
import time

WORDS = ("the river bank was quiet while people paid money into the bank across the street and the animal "
         "did not cross because it was too tired").split()


def timed(fn, repeats: int) -> dict:
    """Median, min and max seconds of `fn()` over `repeats` runs after one warm-up call; in a smoke run
    (BENCH_SMOKE=1), whose figures are not read, one run and no warm-up."""
    if os.environ.get("BENCH_SMOKE") == "1":
        repeats = 1
    else:
        fn()
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return {"median": statistics.median(runs), "min": min(runs), "max": max(runs), "n": repeats}


def text_of_tokens(tokenizer, n_tokens: int, salt: str = "") -> str:
    """A sentence that tokenizes to exactly n_tokens (special tokens included) for this tokenizer."""
    words = ([salt] if salt else []) + [WORDS[i % len(WORDS)] for i in range(4 * n_tokens)]
    lo, hi = 1, len(words)
    while lo < hi:  # the largest prefix whose token count is <= n_tokens
        mid = (lo + hi + 1) // 2
        if len(tokenizer(" ".join(words[:mid]))["input_ids"]) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])
