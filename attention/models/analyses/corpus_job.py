"""A corpus survey as a batch job: parts that merge into the whole, saved as it goes, resumed after a stop.

    attention-explorer corpus FILE --model NAME --out PATH [--resume] [--ray [ADDRESS] --workers N]

`survey_file` reads the corpus (attention.models.analyses.corpus), cuts it into parts of PART_TEXTS texts,
surveys each (corpus_survey with `first` set, so each part names its texts by their place in the whole),
merges the parts in corpus order into what is done (merge_surveys) and saves that to PATH after every
merge. With `resume`, a survey already at PATH of the same settings whose texts are the corpus's first texts
is kept: only the texts after them are read. A job stopped after half the texts and resumed ends equal to
one that ran through: the top examples are the largest weights of the union, the statistics follow the
texts, and the sample keeps the lowest priorities, which each position drew from its text's own generator.

The parts are surveyed in this process (survey_file), or on Ray (survey_file_on_ray: one model replica per
worker, attention.models.analyses.corpus_ray), which hands back parts in any order; both merge the same
parts the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from attention.models.analyses.corpus import read_corpus
from attention.models.analyses.corpus_pass import lowest
from attention.models.analyses.corpus_survey import (
    SAMPLE_POINTS,
    TOP_K,
    CorpusSurvey,
    corpus_survey,
    load_corpus_survey,
)
from attention.models.analyses.job_parts import run_in_parts
from attention.models.forward.model import LoadedModel

PART_TEXTS = 25  # texts surveyed between two saves of a job

Progress = Callable[[int, int, int], None]  # (texts done, texts in all, tokens read so far)
Parts = list[tuple[int, tuple[str, ...]]]  # (first, texts): parts of the corpus and where each starts


def merge_surveys(done: CorpusSurvey, part: CorpusSurvey, *, sample: int = SAMPLE_POINTS) -> CorpusSurvey:
    """The survey of done's texts followed by part's (part surveyed with first=len(done.texts)), keeping
    `sample` positions; ValueError when they are not of the same model and settings."""
    same = ("model_name", "max_tokens", "include_sinks")
    if any(getattr(done, f) != getattr(part, f) for f in same) or done.top_weight.shape != part.top_weight.shape:
        raise ValueError("the two surveys are of different models or settings: they cannot be merged")
    k = done.top_weight.shape[-1]
    weight = np.concatenate([done.top_weight, part.top_weight], -1)
    weight = np.where(np.concatenate([done.top_text, part.top_text], -1) < 0, -1.0, weight)  # no example: last
    order = np.argsort(-weight, axis=-1, kind="stable")[..., :k]

    def top(name: str) -> np.ndarray:
        return np.take_along_axis(np.concatenate([getattr(done, name), getattr(part, name)], -1), order, -1)

    vectors = done.q_sample is not None and part.q_sample is not None
    where_done = np.stack([done.sample_text, done.sample_position], 1)
    where_part = np.stack([part.sample_text, part.sample_position], 1)
    sampled = lowest(sample, (done.sample_priority, part.sample_priority), (where_done, where_part),
                     *(((done.q_sample, part.q_sample), (done.k_sample, part.k_sample)) if vectors else ()))
    return replace(
        done, texts=done.texts + part.texts, tokens=done.tokens + part.tokens,
        truncated=done.truncated + part.truncated, top_text=top("top_text"), top_query=top("top_query"),
        top_key=top("top_key"), top_weight=np.maximum(top("top_weight"), 0).astype(np.float32),
        statistics={name: np.concatenate([v, part.statistics[name]]) for name, v in done.statistics.items()},
        sample_priority=sampled[0], sample_text=sampled[1][:, 0], sample_position=sampled[1][:, 1],
        q_sample=sampled[2] if vectors else None, k_sample=sampled[3] if vectors else None, projection_cache={},
        spans=None if done.spans is None or part.spans is None else np.concatenate([done.spans, part.spans]))


def survey_file(loaded: LoadedModel, corpus_path: str | Path, out: str | Path, *, resume: bool = False,
                k: int = TOP_K, include_sinks: bool = False, sample: int = SAMPLE_POINTS,
                part_texts: int = PART_TEXTS, progress: Progress | None = None,
                stop_after: int | None = None) -> CorpusSurvey:
    """Survey the corpus in `corpus_path` in this process and save it to `out` after every part (module
    docstring). `stop_after` stops after that many texts (a test of resuming). ValueError for a corpus file
    or a saved part that cannot be used."""
    def surveyed(parts: Parts) -> Iterator[tuple[int, CorpusSurvey]]:
        for first, texts in parts:
            yield first, corpus_survey(loaded, texts, k=k, include_sinks=include_sinks, sample=sample, first=first)

    return run_job(surveyed, corpus_path, out, model_name=loaded.spec.name, resume=resume, k=k,
                   include_sinks=include_sinks, sample=sample, part_texts=part_texts, progress=progress,
                   stop_after=stop_after)


def run_job(surveyed: Callable[[Parts], Iterable[tuple[int, CorpusSurvey]]],
            corpus_path: str | Path, out: str | Path, *, model_name: str | None, resume: bool, k: int,
            include_sinks: bool, sample: int, part_texts: int, progress: Progress | None,
            stop_after: int | None = None) -> CorpusSurvey:
    """The job around a way of surveying parts: `surveyed(parts)` yields (first, survey) for each part, in
    any order; they are merged in corpus order and saved after every merge. `model_name`
    None: checked when the first part comes back (a worker loaded the model)."""
    corpus_path, out = Path(corpus_path), Path(out)
    texts = read_corpus(corpus_path.name, corpus_path.read_bytes()).texts
    done = None
    if resume and out.exists():
        done = load_corpus_survey(out)
        if done.include_sinks != include_sinks or done.texts != texts[:len(done.texts)] or \
                done.top_weight.shape[-1] != k or model_name not in (None, done.model_name):
            raise ValueError(f"{out} holds a survey of other texts, another model or other settings: it cannot be "
                             "resumed here (remove it, or name another --out)")
    tokens = [0 if done is None else sum(len(t) for t in done.tokens)]  # read so far, for the progress

    def same_model(done: CorpusSurvey | None, first: int, part: CorpusSurvey) -> CorpusSurvey:
        if done is not None and part.model_name != done.model_name:
            raise ValueError(f"{out} holds a survey of {done.model_name}, not {part.model_name}: it cannot be "
                             "resumed here (remove it, or name another --out)")
        return part

    def report(done: CorpusSurvey, part: CorpusSurvey) -> None:
        tokens[0] += sum(len(t) for t in part.tokens)
        if progress:
            progress(len(done.texts), len(texts), tokens[0])

    done = run_in_parts(texts, done, size=lambda found: len(found.texts), part_size=part_texts, run=surveyed,
                        merge=functools.partial(merge_surveys, sample=sample), save=lambda found: found.save(out),
                        check=same_model, after=report, stop_after=stop_after)
    if done is None:
        raise ValueError(f"{corpus_path} holds no text to survey")
    return done
