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
from collections.abc import Callable, Iterator
from pathlib import Path

from attention.models.analyses.corpus_job import PART_TEXTS, Parts, Progress, run_job
from attention.models.analyses.corpus_survey import (
    SAMPLE_POINTS,
    TOP_K,
    CorpusSurvey,
    corpus_survey,
    load_corpus_survey,
    survey_bytes,
)
from attention.models.analyses.job_parts import on_ray, require_ray
from attention.models.forward.model import LoadedModel


def survey_file_on_ray(load: Callable[[], LoadedModel], corpus_path: str | Path, out: str | Path, *,
                       address: str | None = None, workers: int = 2, resume: bool = False, k: int = TOP_K,
                       include_sinks: bool = False, sample: int = SAMPLE_POINTS, part_texts: int = PART_TEXTS,
                       progress: Progress | None = None) -> CorpusSurvey:
    """survey_file on Ray (module docstring). `load`: a function of no arguments that returns the model
    (e.g. functools.partial(load_model, "smollm2")), called once in each worker. ValueError without Ray, or
    for a corpus file or saved part that cannot be used."""
    require_ray()
    settings = {"k": k, "include_sinks": include_sinks, "sample": sample}

    def surveyed(parts: Parts) -> Iterator[tuple[int, CorpusSurvey]]:
        rows = [(first, json.dumps(list(texts))) for first, texts in parts]
        for first, data in on_ray(load, survey_part, rows, address=address, workers=workers, what="the survey",
                                  **settings):
            yield first, load_corpus_survey(data, first=first)

    return run_job(surveyed, corpus_path, out, model_name=None, resume=resume, part_texts=part_texts,
                   progress=progress, **settings)


def survey_part(loaded: LoadedModel, first: int, texts: str, **settings) -> bytes:
    """One part's survey in a worker, as its file's bytes: `texts` a JSON list, the first numbered `first`."""
    return survey_bytes(corpus_survey(loaded, json.loads(texts), first=first, **settings))
