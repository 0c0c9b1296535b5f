"""One runner for jobs over many inputs: the corpus survey's texts (corpus_job, corpus_ray) and the batch job's
prompt pairs (batch_job, batch_ray), and any job of that shape.

    run_in_parts(items, done, ...)      cut the inputs not yet done into parts, run them (in any order), merge
                                        them in input order, save after every merge; `done`: a saved result
                                        being resumed (its size says where to start), or None
    on_ray(load, work, rows, ...)       the parts run by Ray Data: `workers` actors, each calling `load()` once
                                        (its own replica of the model), then `work(loaded, first, part)` for
                                        each part it is handed; (first, bytes) back as each part finishes

A job's own module says what a part is, how two results merge and how a result is saved and read back.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np

from attention.models.forward.model import LoadedModel

R = TypeVar("R")  # a job's result over a run of inputs (a CorpusSurvey, a BatchJob)
Part = tuple[int, Sequence]  # (first, items[first:first + n]): a part of the inputs and where it starts

RAY_MISSING = ("--ray needs Ray, an extra of this package: pip install 'attention-explorer[ray]' "
               "(or pip install -r requirements-ray.txt)")


def run_in_parts(items: Sequence, done: R | None, *, size: Callable[[R], int], part_size: int,
                 run: Callable[[list[Part]], Iterable[tuple[int, R]]], merge: Callable[[R, R], R],
                 save: Callable[[R], None], check: Callable[[R | None, int, R], R] | None = None,
                 after: Callable[[R, R], None] | None = None, stop_after: int | None = None) -> R | None:
    """The result over `items`, from `done` (None, or a saved result covering items[:size(done)]) on: the rest
    cut into parts of `part_size` (up to `stop_after` items), `run(parts)` yields (first, result) for each in any
    order; each is checked (`check(done, first, part)` returns the part to keep, or raises ValueError), merged in
    input order (`merge(done, part)`), saved (`save(done)`), and reported (`after(done, part)`). None when
    there was nothing to run and nothing done."""
    start = 0 if done is None else size(done)
    last = len(items) if stop_after is None else min(len(items), stop_after)
    parts = [(first, items[first:min(first + part_size, last)]) for first in range(start, last, part_size)]
    waiting: dict[int, R] = {}  # parts back before the one that comes first
    for first, part in run(parts):
        waiting[first] = part if check is None else check(done, first, part)
        while (start := 0 if done is None else size(done)) in waiting:
            part = waiting.pop(start)
            done = part if done is None else merge(done, part)
            save(done)
            if after is not None:
                after(done, part)
    return done


def require_ray() -> None:
    """ValueError, saying how to install it, where Ray (an extra) is not installed."""
    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError:
        raise ValueError(RAY_MISSING) from None


@contextlib.contextmanager
def ray_cluster(address: str | None, workers: int):
    """Ray for the duration: the cluster at `address`, or a local one of `workers` CPUs (stopped at the end);
    one already started in this process is used as it is."""
    import ray
    import ray.data

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    try:
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # the job's own progress says it
        ray.data.DataContext.get_current().enable_progress_bars = False
        yield
    finally:
        if started:
            ray.shutdown()


@contextlib.contextmanager
def failed_on_ray(what: str = "the batch job"):
    """A worker's error as ValueError ("`what` failed on Ray: ..."), its cause (the last line of Ray's message)
    in words."""
    import ray

    try:
        yield
    except ray.exceptions.RayError as err:
        cause = [line for line in str(err).splitlines() if line.strip()][-1:]
        raise ValueError(f"{what} failed on Ray: {' '.join(cause) or type(err).__name__}") from err


def on_ray(load: Callable[[], LoadedModel], work: Callable[..., bytes], rows: list[tuple[int, object]], *,
           address: str | None, workers: int, what: str, **settings) -> Iterator[tuple[int, bytes]]:
    """Each (first, part) of `rows` run by a Ray Data actor as `work(loaded, first, part, **settings)` (bytes:
    the part's result as its file), `workers` actors at most, each with its own `load()`; (first, bytes) as
    they finish. A worker's error is a ValueError naming `what` (failed_on_ray)."""
    import ray.data

    if not rows:
        return
    with ray_cluster(address, workers), failed_on_ray(what):
        dataset = ray.data.from_items([{"first": first, "part": part} for first, part in rows],
                                      override_num_blocks=len(rows))
        found = dataset.map_batches(PartWorker, fn_constructor_kwargs={"load": load, "work": work, **settings},
                                    batch_size=1, concurrency=min(workers, len(rows)), num_cpus=1)
        for row in found.iter_rows():
            yield int(row["first"]), bytes(row["result"])


class PartWorker:
    """A Ray Data actor: one replica of the model (`load()`), running `work` on the parts it is handed."""

    def __init__(self, load: Callable[[], LoadedModel], work: Callable[..., bytes], **settings):
        self.loaded, self.work, self.settings = load(), work, settings

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = [self.work(self.loaded, int(first), part, **self.settings)
                   for first, part in zip(batch["first"], batch["part"], strict=True)]
        return {"first": batch["first"], "result": np.array(results, dtype=object)}
