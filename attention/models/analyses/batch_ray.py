"""The batch job on Ray: one model replica per worker, the pairs' parts as rows of a Ray Dataset.

    attention-explorer batch PAIRS --model NAME --out PATH --ray [ADDRESS] [--workers N]

`batch_file_on_ray(load, PAIRS, PATH)` is batch_file (attention.models.analyses.batch_job) with the parts run
by Ray Data, as the corpus job runs its parts (attention.models.analyses.corpus_ray): each part (its first
pair's index and its pairs as .jsonl text) is a row; `map_batches` hands rows to `workers` actors, each of which
calls `load()` once (its own replica of the model) and returns the part's job as .safetensors bytes
(batch_job_bytes); the parts come back as they finish and the job merges them in file order, saving after each,
as it does in one process. Resuming works the same way.

Without an address Ray starts a local cluster of `workers` CPUs and stops it at the end; with one ("auto", or
"ray://HOST:10001") it joins that cluster, whose machines each need this package and the model. Ray is an
extra: pip install 'attention-explorer[ray]' (requirements-ray.txt).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from attention.models.analyses.batch_job import (
    ANALYSES,
    PART_PAIRS,
    BatchJob,
    Parts,
    Progress,
    batch_job_bytes,
    batch_part,
    check_settings,
    load_batch_job,
    run_batch_job,
)
from attention.models.analyses.batch_pairs import PromptPairs, read_prompt_pairs, write_prompt_pairs
from attention.models.analyses.corpus_ray import RAY_MISSING
from attention.models.forward.model import LoadedModel


def batch_file_on_ray(load: Callable[[], LoadedModel], pairs: str | Path | PromptPairs, out: str | Path, *,
                      address: str | None = None, workers: int = 2, analyses=ANALYSES, positions: str = "auto",
                      resume: bool = False, part_pairs: int = PART_PAIRS, progress: Progress | None = None) -> BatchJob:
    """batch_file on Ray (module docstring). `load`: a function of no arguments that returns the model (e.g.
    functools.partial(load_model, "smollm2")), called once in each worker. ValueError without Ray, or for a
    pairs file, a model or a saved job that cannot be used (a worker's error in its own words)."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    check_settings(analyses, positions)
    if workers < 1:
        raise ValueError(f"{workers} workers: a job on Ray needs at least one")
    settings = {"analyses": tuple(analyses), "positions": positions}

    def batched(parts: Parts) -> Iterator[tuple[int, BatchJob]]:
        if not parts:
            return
        with ray_cluster(address, workers), failed_on_ray():
            rows = [{"first": first, "pairs": write_prompt_pairs(part)} for first, part in parts]
            dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
            found = dataset.map_batches(_PartRunner, fn_constructor_kwargs={"load": load, **settings},
                                        batch_size=1, concurrency=min(workers, len(rows)), num_cpus=1)
            for row in found.iter_rows():
                yield int(row["first"]), load_batch_job(bytes(row["job"]))

    return run_batch_job(batched, pairs, out, model_name=None, resume=resume, part_pairs=part_pairs,
                         progress=progress, **settings)


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
def failed_on_ray():
    """A worker's error as ValueError, its cause (the last line of Ray's message) in words."""
    import ray

    try:
        yield
    except ray.exceptions.RayError as err:
        cause = [line for line in str(err).splitlines() if line.strip()][-1:]
        raise ValueError(f"the batch job failed on Ray: {' '.join(cause) or type(err).__name__}") from err


class _PartRunner:
    """A Ray Data actor: one replica of the model, running the analyses on the parts it is handed."""

    def __init__(self, load: Callable[[], LoadedModel], **settings):
        self.loaded = load()
        self.settings = settings

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        jobs = [batch_job_bytes(batch_part(self.loaded, read_prompt_pairs("part.jsonl", str(text).encode()),
                                           first=int(first), **self.settings))
                for first, text in zip(batch["first"], batch["pairs"], strict=True)]
        return {"first": batch["first"], "job": np.array(jobs, dtype=object)}
