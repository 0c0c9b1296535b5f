"""Batch analyses over a file of prompt pairs as a job: parts that merge into the whole, saved as it goes,
resumed after a stop (the corpus job's design, attention.models.analyses.corpus_job, for prompt pairs).

    attention-explorer batch PAIRS --model NAME --out PATH [--analysis attribution|patching|both] [--resume]
                             [--ray [ADDRESS] --workers N]

`batch_file` reads the pairs (a .jsonl or .csv file, batch_pairs.read_prompt_pairs, or PromptPairs already
made), cuts them into parts of PART_PAIRS pairs, runs batch_attribution and batch_patching on each
(batch_part), merges the parts in file order (merge_batch_jobs: every per-prompt array is concatenated, so each
prompt keeps its own value) and saves what is done to PATH after every merge (.safetensors: the arrays, and a
JSON header with the model, the settings and the pairs themselves). With `resume`, a job already at PATH of the
same model and settings whose pairs are the file's first pairs is kept: only the pairs after them are run.

Each prompt's values do not depend on the others in its batch (batch_inputs pads each prompt to give what it
gives alone), so the merged job equals batch_attribution and batch_patching run on all the pairs at once, to
float32 rounding, with two cares for patching:
    positions   "auto" patches every position of a part whose prompts all have one length, and only the last
                token of one whose prompts do not: parts of different layouts cannot merge (ValueError, which
                says to patch the last position everywhere, positions="last", or to use pairs of one length)
    labels      what stands at each position (batch_patching.position_labels: the token every prompt has, the
                roles IO/S1/S2, or the first prompt's token and "…") depends on all the prompts: each part keeps,
                per position, its first prompt's token, the token all its prompts share (or none) and their
                roles, which merge into the labels of the whole
`runs`, `tokens`, `block_tokens` and `seconds` add up the parts' work (a part skips the positions before its
own first difference, so they may differ from one call's).

The parts run in this process (batch_file), or on Ray (batch_file_on_ray, attention.models.analyses.batch_ray:
one model replica per worker), which hands parts back in any order; both merge them the same way.

Shapes: B pairs, L layers, H heads, P positions patched.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attention.models.analyses.batch import BatchAttribution, batch_attribution, pair_token_ids
from attention.models.analyses.batch_inputs import pad_batch
from attention.models.analyses.batch_pairs import PromptPair, PromptPairs, read_prompt_pairs
from attention.models.analyses.batch_patching import POSITIONS, BatchPatching, batch_patching, position_roles
from attention.models.analyses.job_parts import run_in_parts
from attention.models.analyses.saved_file import read_saved
from attention.models.forward.model import LoadedModel

ANALYSES = ("attribution", "patching")
PART_PAIRS = 50  # pairs run between two saves of a job
FORMAT = "attention-explorer batch job 1"

Progress = Callable[[int, int], None]  # (pairs done, pairs in all)
Parts = list[tuple[int, PromptPairs]]  # (first, pairs): parts of the file and where each starts
Slot = tuple[str, int, str]  # one patched position: (first prompt's token, the id all share or -1, roles or "")

_ATTRIBUTION = ("heads", "mlps", "embeddings", "biases", "total", "model")
_PATCHING = ("recovery", "patched", "clean", "corrupted")
_WORK = ("runs", "tokens", "block_tokens", "seconds")


@dataclass(frozen=True)
class BatchJob:
    """What a job found on its pairs so far: each analysis asked for, over every pair, in file order."""

    model_name: str
    analyses: tuple[str, ...]  # of ANALYSES
    positions: str  # patching's setting (batch_patching's `positions`)
    pairs: PromptPairs  # (B,) the pairs run, the file's first B
    attribution: BatchAttribution | None  # batch_attribution's fields, each (B, ...)
    patching: BatchPatching | None  # batch_patching's fields, each (B, ...); labels merged from `slots`
    slots: tuple[Slot, ...] = ()  # (P,) what each patched position holds (module docstring); () for "last"

    def __len__(self) -> int:
        return len(self.pairs)

    def save(self, path: str | Path) -> None:
        """Write the job to one .safetensors file (module docstring)."""
        Path(path).write_bytes(batch_job_bytes(self))


def batch_part(loaded: LoadedModel, pairs: PromptPairs, *, analyses=ANALYSES, positions: str = "auto",
               first: int = 0) -> BatchJob:
    """The analyses on one part of the pairs (the file's pairs first...first + B - 1, said in errors)."""
    check_settings(analyses, positions)
    if loaded.spec.architecture != "decoder-only":
        raise ValueError(f"{loaded.spec.name} is not a decoder: batch analyses read each prompt's next token "
                         "(choose smollm2, gemma3 or another decoder)")
    try:
        attribution = batch_attribution(loaded, pairs) if "attribution" in analyses else None
        patching = batch_patching(loaded, pairs, positions=positions) if "patching" in analyses else None
        slots = () if patching is None or patching.positions == (-1,) else _slots(loaded, pairs)
    except ValueError as err:
        raise ValueError(f"pairs {first + 1}-{first + len(pairs)}: {err}") from None
    return BatchJob(loaded.spec.name, tuple(analyses), positions, pairs, attribution, patching, slots)


def batch_job_of(loaded: LoadedModel, pairs: PromptPairs, attribution: BatchAttribution | None,
                 patching: BatchPatching | None, *, positions: str = "auto") -> BatchJob:
    """Results already computed on `pairs` (the batch page's) as a job, to save (batch_job_bytes) and read back
    with load_batch_job in a notebook as the command's jobs are."""
    analyses = tuple(name for name, result in (("attribution", attribution), ("patching", patching)) if result)
    if not analyses:
        raise ValueError("nothing to save: neither direct attribution nor patching was computed")
    slots = () if patching is None or patching.positions == (-1,) else _slots(loaded, pairs)
    return BatchJob(loaded.spec.name, analyses, positions, pairs, attribution, patching, slots)


def _slots(loaded: LoadedModel, pairs: PromptPairs) -> tuple[Slot, ...]:
    """Per position of aligned clean prompts: the first prompt's token, the id every prompt has there (-1: they
    differ), and the roles there joined ("IO/S1"; "" unless every prompt has one)."""
    ids = pad_batch(loaded, [r.clean for r in pairs], side="right").ids.cpu().numpy()  # (B, T)
    roles = position_roles(ids, *pair_token_ids(loaded.tokenizer, pairs))  # (B, T)
    return tuple((loaded.tokenizer.decode([int(ids[0, c])]), int(ids[0, c]) if (ids[:, c] == ids[0, c]).all() else -1,
                  "/".join(sorted(set(roles[:, c]))) if all(roles[:, c]) else "") for c in range(ids.shape[1]))


def _labels(slots: tuple[Slot, ...]) -> tuple[str, ...]:
    """batch_patching.position_labels of the prompts the slots were merged from."""
    return tuple(shown if same >= 0 else roles or shown + "…" for shown, same, roles in slots)


def check_settings(analyses, positions: str) -> None:
    """ValueError for an unknown analysis or patching positions."""
    if not analyses or any(a not in ANALYSES for a in analyses):
        raise ValueError(f"analyses {tuple(analyses)}: choose among {', '.join(ANALYSES)}")
    if positions not in POSITIONS:
        raise ValueError(f"positions {positions!r}: choose one of {', '.join(POSITIONS)}")


def merge_batch_jobs(done: BatchJob, part: BatchJob) -> BatchJob:
    """The job of done's pairs followed by part's; ValueError when they are not of one model and settings, or
    patch different positions."""
    if (done.model_name, done.analyses, done.positions) != (part.model_name, part.analyses, part.positions):
        raise ValueError("the two jobs are of different models or settings: they cannot be merged")
    pairs = PromptPairs(done.pairs.rows + part.pairs.rows, done.pairs.source, done.pairs.corruption,
                        done.pairs.skipped)
    attribution = patching = None
    if done.attribution is not None:
        attribution = BatchAttribution(*(np.concatenate([getattr(done.attribution, f), getattr(part.attribution, f)])
                                         for f in _ATTRIBUTION), pairs)
    slots = done.slots
    if done.patching is not None:
        a, b = done.patching, part.patching
        if a.positions != b.positions:
            where = f"pairs {len(done) + 1}-{len(done) + len(part)}"
            raise ValueError(f"{where} patch {_layout(b)} but the pairs before them {_layout(a)}: with positions "
                             "'auto' a part whose prompts all have one length patches every position, one whose "
                             "prompts do not only the last. Patch the last position everywhere (--positions last) "
                             "or use pairs of one length.")
        slots = tuple((s, x if x == y else -1, r and q and "/".join(sorted(set(r.split("/")) | set(q.split("/")))))
                      for (s, x, r), (_, y, q) in zip(done.slots, part.slots, strict=True))
        patching = BatchPatching(*(np.concatenate([getattr(a, f), getattr(b, f)]) for f in _PATCHING), a.positions,
                                 _labels(slots) if slots else a.labels, *(getattr(a, f) + getattr(b, f) for f in _WORK),
                                 pairs)
    return replace(done, pairs=pairs, attribution=attribution, patching=patching, slots=slots)


def _layout(patching: BatchPatching) -> str:
    return "the last token only" if patching.positions == (-1,) else f"all {len(patching.positions)} positions"


def batch_file(loaded: LoadedModel, pairs: str | Path | PromptPairs, out: str | Path, *, analyses=ANALYSES,
               positions: str = "auto", resume: bool = False, part_pairs: int = PART_PAIRS,
               progress: Progress | None = None, stop_after: int | None = None) -> BatchJob:
    """Run the analyses over the pairs in this process and save to `out` after every part (module docstring).
    `stop_after` stops after that many pairs (a test of resuming). ValueError for a pairs file, a model or a
    saved job that cannot be used."""
    def batched(parts: Parts) -> Iterator[tuple[int, BatchJob]]:
        for first, part in parts:
            yield first, batch_part(loaded, part, analyses=analyses, positions=positions, first=first)

    return run_batch_job(batched, pairs, out, model_name=loaded.spec.name, analyses=analyses, positions=positions,
                         resume=resume, part_pairs=part_pairs, progress=progress, stop_after=stop_after)


def run_batch_job(batched: Callable[[Parts], Iterable[tuple[int, BatchJob]]], pairs: str | Path | PromptPairs,
                  out: str | Path, *, model_name: str | None, analyses, positions: str, resume: bool,
                  part_pairs: int, progress: Progress | None, stop_after: int | None = None) -> BatchJob:
    """The job around a way of running parts: `batched(parts)` yields (first, job) for each part, in any order;
    they are merged in file order and saved after every merge. `model_name` None: checked when the first part
    comes back (a worker loaded the model)."""
    check_settings(analyses, positions)
    analyses, out = tuple(a for a in ANALYSES if a in analyses), Path(out)
    if not isinstance(pairs, PromptPairs):
        pairs = read_prompt_pairs(pairs)
    done = None
    if resume and out.exists():
        done = load_batch_job(out)
        if (done.analyses, done.positions) != (analyses, positions) or model_name not in (None, done.model_name) \
                or done.pairs.rows != pairs.rows[:len(done)]:
            raise ValueError(f"{out} holds a job of other pairs, another model or other settings: it cannot be "
                             "resumed here (remove it, or name another --out)")

    def same_model_and_pairs(done: BatchJob | None, first: int, part: BatchJob) -> BatchJob:
        if done is not None and part.model_name != done.model_name:
            raise ValueError(f"{out} holds a job of {done.model_name}, not {part.model_name}: it cannot be "
                             "resumed here (remove it, or name another --out)")
        if part.pairs.rows != pairs.rows[first:first + len(part)]:
            raise ValueError(f"the part from pair {first + 1} came back with other pairs than were sent")
        return _with_pairs(part, pairs[first:first + len(part)])

    def report(done: BatchJob, part: BatchJob) -> None:
        if progress:
            progress(len(done), len(pairs))

    done = run_in_parts(pairs, done, size=len, part_size=part_pairs, run=batched, merge=merge_batch_jobs,
                        save=lambda job: job.save(out), check=same_model_and_pairs, after=report,
                        stop_after=stop_after)
    if done is None:
        raise ValueError("there are no prompt pairs to run")
    return done


def _with_pairs(job: BatchJob, pairs: PromptPairs) -> BatchJob:
    """The job naming these pairs (the file's, with its name) in each of its results."""
    return replace(job, pairs=pairs,
                   attribution=None if job.attribution is None else replace(job.attribution, pairs=pairs),
                   patching=None if job.patching is None else replace(job.patching, pairs=pairs))


def batch_job_bytes(job: BatchJob) -> bytes:
    """The job as .safetensors bytes: its arrays ("attribution.heads", "patching.recovery", ...) and a JSON
    header (model, settings, the pairs, patching's positions and work) under the metadata key "batch_job"."""
    from safetensors.numpy import save

    arrays = {}
    for name, result, fields in (("attribution", job.attribution, _ATTRIBUTION), ("patching", job.patching, _PATCHING)):
        if result is not None:
            arrays.update({f"{name}.{f}": np.ascontiguousarray(getattr(result, f)) for f in fields})
    header = {"format": FORMAT, "model_name": job.model_name, "analyses": list(job.analyses),
              "positions": job.positions, "pair_count": len(job.pairs), "source": job.pairs.source,
              "corruption": job.pairs.corruption, "rows": [[r.clean, r.corrupted, r.target, r.foil] for r in job.pairs]}
    if job.patching is not None:
        p = job.patching
        header["patching"] = {"positions": list(p.positions), "labels": list(p.labels), "slots": [list(s) for s in
                              job.slots], **{f: getattr(p, f) for f in _WORK}}
    return save(arrays, metadata={"batch_job": json.dumps(header, ensure_ascii=False)})


def load_batch_job(source: str | Path | bytes) -> BatchJob:
    """A job saved by BatchJob.save, from a path or the file's bytes; ValueError, in words, for a file that is
    not one (another format, cut short, arrays missing or of other lengths than the pairs). Never unpickles."""
    header, arrays = read_saved(source, "batch_job", "a saved batch job")
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"this .safetensors file holds no batch job (no \"batch_job\" header of format “{FORMAT}”)")
    try:
        pairs = PromptPairs(tuple(PromptPair(*map(str, row)) for row in header["rows"]), str(header["source"]),
                            str(header["corruption"]))
        analyses = tuple(map(str, header["analyses"]))
        attribution = patching = None
        if "attribution" in analyses:
            attribution = BatchAttribution(*(arrays[f"attribution.{f}"] for f in _ATTRIBUTION), pairs)
        slots: tuple[Slot, ...] = ()
        if "patching" in analyses:
            p = header["patching"]
            slots = tuple((str(s), int(i), str(r)) for s, i, r in p["slots"])
            patching = BatchPatching(*(arrays[f"patching.{f}"] for f in _PATCHING), tuple(map(int, p["positions"])),
                                     tuple(map(str, p["labels"])), int(p["runs"]), int(p["tokens"]),
                                     int(p["block_tokens"]), float(p["seconds"]), pairs)
        job = BatchJob(str(header["model_name"]), analyses, str(header["positions"]), pairs, attribution, patching,
                       slots)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"the saved batch job is incomplete or cannot be read: {err!r}") from None
    lengths = {len(getattr(r, f)) for r, fields in ((attribution, _ATTRIBUTION), (patching, _PATCHING))
               if r is not None for f in fields}
    if lengths != {len(pairs)} or not pairs.rows:
        raise ValueError(f"the saved batch job does not hold together: {len(pairs)} pairs, arrays of {sorted(lengths)}")
    return job
