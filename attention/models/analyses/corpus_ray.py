"""The corpus job on Ray: one model replica per worker, the corpus's parts as rows of a Ray Dataset.

    attention-explorer corpus FILE --model NAME --out PATH --ray [ADDRESS] [--workers N]

`survey_file_on_ray(load, FILE, PATH)` is survey_file (attention.models.analyses.corpus_job) with the parts
surveyed by Ray Data: each part (its first text's index and its texts) is a row; `map_batches` hands rows to
`workers` actors, each of which calls `load()` once (its own replica of the model) and returns the part's
survey as .safetensors bytes (survey_bytes); the parts come back as they finish and the job merges them in
corpus order, saving after each, as it does in one process. Resuming works the same way.

Without an address Ray starts a local cluster of `workers` CPUs and stops it at the end; with one
("auto", or "ray://HOST:10001") it joins that cluster, whose machines each need this package and the model.
Ray is an extra: pip install 'attention-explorer[ray]' (requirements-ray.txt). On one 2-core machine it
pays no speed-up: make bench records its overhead.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from attention.models.analyses.corpus_job import PART_TEXTS, Parts, Progress, run_job
from attention.models.analyses.corpus_survey import (
    SAMPLE_POINTS,
    TOP_K,
    CorpusSurvey,
    corpus_survey,
    load_corpus_survey,
    survey_bytes,
)
from attention.models.forward.model import LoadedModel

RAY_MISSING = ("--ray needs Ray, an extra of this package: pip install 'attention-explorer[ray]' "
               "(or pip install -r requirements-ray.txt)")


def survey_file_on_ray(load: Callable[[], LoadedModel], corpus_path: str | Path, out: str | Path, *,
                       address: str | None = None, workers: int = 2, resume: bool = False, k: int = TOP_K,
                       include_sinks: bool = False, sample: int = SAMPLE_POINTS, part_texts: int = PART_TEXTS,
                       progress: Progress | None = None) -> CorpusSurvey:
    """survey_file on Ray (module docstring). `load`: a function of no arguments that returns the model
    (e.g. functools.partial(load_model, "smollm2")), called once in each worker. ValueError without Ray, or
    for a corpus file or saved part that cannot be used."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    settings = {"k": k, "include_sinks": include_sinks, "sample": sample}

    def surveyed(parts: Parts) -> Iterator[tuple[int, CorpusSurvey]]:
        if not parts:
            return
        started = not ray.is_initialized()
        if started:
            ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False, logging_level="ERROR")
        try:
            logging.getLogger("ray.data").setLevel(logging.ERROR)  # the job's own progress bar says it
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False
            rows = [{"first": first, "texts": json.dumps(list(texts))} for first, texts in parts]
            dataset = ray.data.from_items(rows, override_num_blocks=len(rows))
            found = dataset.map_batches(_PartSurveyor, fn_constructor_kwargs={"load": load, **settings},
                                        batch_size=1, concurrency=min(workers, len(rows)), num_cpus=1)
            for row in found.iter_rows():
                yield int(row["first"]), load_corpus_survey(bytes(row["survey"]), first=int(row["first"]))
        except ray.exceptions.RayError as err:  # a worker's error, its cause on the last line
            cause = [line for line in str(err).splitlines() if line.strip()][-1:]
            raise ValueError(f"the survey failed on Ray: {' '.join(cause) or type(err).__name__}") from err
        finally:
            if started:
                ray.shutdown()

    return run_job(surveyed, corpus_path, out, model_name=None, resume=resume, part_texts=part_texts,
                   progress=progress, **settings)


class _PartSurveyor:
    """A Ray Data actor: one replica of the model, surveying the parts it is handed."""

    def __init__(self, load: Callable[[], LoadedModel], **settings):
        self.loaded = load()
        self.settings = settings

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        surveys = [survey_bytes(corpus_survey(self.loaded, json.loads(texts), first=int(first), **self.settings))
                   for first, texts in zip(batch["first"], batch["texts"], strict=True)]
        return {"first": batch["first"], "survey": np.array(surveys, dtype=object)}
