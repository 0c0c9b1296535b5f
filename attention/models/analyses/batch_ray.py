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

from collections.abc import Callable, Iterator
from pathlib import Path

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
from attention.models.analyses.job_parts import on_ray, require_ray
from attention.models.forward.model import LoadedModel


def batch_file_on_ray(load: Callable[[], LoadedModel], pairs: str | Path | PromptPairs, out: str | Path, *,
                      address: str | None = None, workers: int = 2, analyses=ANALYSES, positions: str = "auto",
                      resume: bool = False, part_pairs: int = PART_PAIRS, progress: Progress | None = None) -> BatchJob:
    """batch_file on Ray (module docstring). `load`: a function of no arguments that returns the model (e.g.
    functools.partial(load_model, "smollm2")), called once in each worker. ValueError without Ray, or for a
    pairs file, a model or a saved job that cannot be used (a worker's error in its own words)."""
    require_ray()
    check_settings(analyses, positions)
    if workers < 1:
        raise ValueError(f"{workers} workers: a job on Ray needs at least one")
    settings = {"analyses": tuple(analyses), "positions": positions}

    def batched(parts: Parts) -> Iterator[tuple[int, BatchJob]]:
        rows = [(first, write_prompt_pairs(part)) for first, part in parts]
        for first, data in on_ray(load, batch_part_bytes, rows, address=address, workers=workers,
                                  what="the batch job", **settings):
            yield first, load_batch_job(data)

    return run_batch_job(batched, pairs, out, model_name=None, resume=resume, part_pairs=part_pairs,
                         progress=progress, **settings)


def batch_part_bytes(loaded: LoadedModel, first: int, pairs: str, **settings) -> bytes:
    """One part's job in a worker, as its file's bytes: `pairs` as .jsonl text, the first numbered `first`."""
    return batch_job_bytes(batch_part(loaded, read_prompt_pairs("part.jsonl", str(pairs).encode()), first=first,
                                      **settings))
