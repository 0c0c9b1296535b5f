"""How long work shares one model with busy pages, in one process, no browser (issue 33; benchmarks/NOTES.md).

    python -m benchmarks.contention [--texts 60] [--scan]

SmolLM2 on one torch thread (as the server runs it). A corpus survey of the first `--texts` texts of the
default corpus runs while three "pages" (threads, each its own session) attend a sentence every 0.5-2 s;
with `--scan`, a fourth session loops Predictions' ablation of every head. Printed: the survey's time, the
pages' pass times (median, p95) and how often each session got the model (ModelLock acquisitions) and how
long it waited for it in all. Not part of `make bench`: a diagnostic for the lock's policy.
"""

from __future__ import annotations

import argparse
import collections
import contextvars
import random
import threading
import time

import numpy as np
import torch

from attention.models import REQUESTER, attend, contrast, corpus_survey, default_corpus, head_ablation, load_model
from attention.toy import examples as ex

SENTENCES = [*ex.BANK_SENTENCES, *ex.IT_SENTENCES]  # the app's own examples (the seeds')
PROMPT, TARGET, FOIL = ex.PREDICTION_EXAMPLES["Mary and John"]  # what the scan ablates every head on


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=60)
    ap.add_argument("--scan", action="store_true", help="a session scanning every head meanwhile")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    loaded = load_model("smollm2")
    texts = default_corpus().texts[:args.texts]

    waits = collections.defaultdict(list)  # session -> each wait for the model's lock, seconds
    lock_class = type(loaded.lock)  # ModelLock: every acquisition timed by wrapping its method
    acquire = lock_class.acquire

    def timed_acquire(lock, *, short=True):
        started = time.perf_counter()
        acquire(lock, short=short)
        waits[REQUESTER.get()].append(time.perf_counter() - started)

    lock_class.acquire = timed_acquire
    stop, page_passes = threading.Event(), []

    def page(name: str) -> None:
        REQUESTER.set(name)
        rng = random.Random(name)
        while not stop.is_set():
            started = time.perf_counter()
            attend(loaded, f"{rng.choice(SENTENCES)} {rng.random()}")
            page_passes.append(time.perf_counter() - started)
            time.sleep(rng.uniform(0.5, 2.0))

    def scanner() -> None:
        REQUESTER.set("scan")
        att = attend(loaded, PROMPT)
        made = contrast(att, loaded.tokenizer, TARGET, FOIL)
        while not stop.is_set():
            head_ablation(loaded, att, made)

    workers = [(page, (f"page {i + 1}",)) for i in range(3)] + ([(scanner, ())] if args.scan else [])
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(f, *a), daemon=True) for f, a in workers]
    for t in threads:
        t.start()
    REQUESTER.set("survey")
    started = time.perf_counter()
    corpus_survey(loaded, texts)
    took = time.perf_counter() - started
    stop.set()
    print(f"survey of {len(texts)} texts: {took:.1f} s; pages' passes: median {np.median(page_passes):.2f} s, "
          f"p95 {np.percentile(page_passes, 95):.2f} s")
    for who, w in sorted(waits.items(), key=lambda kv: str(kv[0])):
        print(f"  {who}: got the model {len(w)} times, waited {sum(w):.1f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
