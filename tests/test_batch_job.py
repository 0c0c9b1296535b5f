"""Batch analyses over a pairs file as a job (attention.models.analyses.batch_job, batch_ray), each against an
independent reference: batch_attribution and batch_patching called once on all the pairs; a job resumed against
one run through; the job on Ray against the job in this process."""

from pathlib import Path

import numpy as np
import pytest

from attention.models import (
    PromptPairs,
    batch_attribution,
    batch_file,
    batch_patching,
    ioi_pairs,
    load_batch_job,
    write_prompt_pairs,
)
from tests.numerics import assert_float32_close
from tests.test_batch import MIXED
from tests.tiny_models import SMALL, build

WIDTH = SMALL["hidden_size"]  # the sums behind every share and logit of the tiny models
ATTRIBUTION = ("heads", "mlps", "embeddings", "biases", "total", "model")
PATCHING = ("recovery", "patched", "clean", "corrupted")


@pytest.fixture(scope="module")
def llama(tok):
    return build("llama", tok)[0]


@pytest.fixture(scope="module")
def pairs_file(tok, tmp_path_factory):
    """9 IOI pairs in a .jsonl file (seed 0: the first two pairs name IO first, so their own position labels
    say "S1"/"IO" where all nine say "IO/S1")."""
    path = tmp_path_factory.mktemp("pairs") / "ioi.jsonl"
    path.write_text(write_prompt_pairs(ioi_pairs(tok, 9, seed=0)))
    return path


@pytest.fixture(scope="module")
def direct(llama, pairs_file):
    """The reference: batch_attribution and batch_patching on all nine pairs at once."""
    from attention.models import read_prompt_pairs

    pairs = read_prompt_pairs(pairs_file)
    return batch_attribution(llama, pairs), batch_patching(llama, pairs)


def assert_equals_direct(job, attribution, patching):
    """Every per-prompt value of the job is the direct call's (float32 paths: padded otherwise, other chunks);
    positions and labels exactly."""
    assert job.pairs.rows == attribution.pairs.rows and job.pairs.source == attribution.pairs.source
    scale = max(np.abs(getattr(attribution, name)).max() for name in ATTRIBUTION)  # of the parts summed
    for name in ATTRIBUTION:  # (a share near 0, the tiny Llama's biases, is rounding of sums of that scale)
        assert_float32_close(getattr(job.attribution, name), getattr(attribution, name), terms=WIDTH,
                             magnitude=scale, err_msg=name)
    assert job.patching.positions == patching.positions and job.patching.labels == patching.labels
    scale = max(np.abs(getattr(patching, name)).max() for name in PATCHING[1:])
    for name in PATCHING[1:]:
        assert_float32_close(getattr(job.patching, name), getattr(patching, name), terms=WIDTH, magnitude=scale,
                             err_msg=name)
    gap = np.abs(patching.clean - patching.corrupted)[:, None, None]  # a ratio: its tolerance scaled by 1 / gap
    np.testing.assert_array_equal(np.isnan(job.patching.recovery), np.isnan(patching.recovery))
    assert (np.nan_to_num(np.abs(job.patching.recovery - patching.recovery)) * gap).max() < 1e-4


@pytest.mark.numeric
def test_the_job_in_parts_equals_the_analyses_on_all_pairs_at_once(llama, pairs_file, direct, tmp_path):
    attribution, patching = direct
    assert batch_patching(llama, attribution.pairs[:2]).labels != patching.labels  # the labels must merge
    seen = []
    out = tmp_path / "job.safetensors"
    job = batch_file(llama, pairs_file, out, part_pairs=2, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(2, 9), (4, 9), (6, 9), (8, 9), (9, 9)]
    assert job.analyses == ("attribution", "patching") and job.model_name == llama.spec.name
    for found in (job, load_batch_job(out)):
        assert_equals_direct(found, attribution, patching)
    only = batch_file(llama, pairs_file, tmp_path / "dla.safetensors", analyses=("attribution",), part_pairs=4)
    assert only.patching is None and load_batch_job(tmp_path / "dla.safetensors").patching is None


def test_results_computed_elsewhere_save_as_a_job_and_read_back_as_they_were(llama, direct):
    """The batch page's download: its results as a job's bytes, read back by load_batch_job unchanged."""
    from attention.models import batch_job_bytes, batch_job_of

    attribution, patching = direct
    back = load_batch_job(batch_job_bytes(batch_job_of(llama, attribution.pairs, attribution, patching)))
    assert back.analyses == ("attribution", "patching") and back.model_name == llama.spec.name
    assert back.pairs.rows == attribution.pairs.rows and back.patching.labels == patching.labels
    for name in ATTRIBUTION:
        np.testing.assert_array_equal(getattr(back.attribution, name), getattr(attribution, name))
    np.testing.assert_array_equal(back.patching.recovery, patching.recovery)
    only = load_batch_job(batch_job_bytes(batch_job_of(llama, attribution.pairs, attribution, None)))
    assert only.analyses == ("attribution",) and only.patching is None
    with pytest.raises(ValueError, match="nothing to save"):
        batch_job_of(llama, attribution.pairs, None, None)


def test_a_job_stopped_after_one_part_resumes_to_one_run_through(llama, pairs_file, tmp_path):
    through = batch_file(llama, pairs_file, tmp_path / "through.safetensors", part_pairs=3)
    out = tmp_path / "job.safetensors"
    half = batch_file(llama, pairs_file, out, part_pairs=3, stop_after=3)
    assert len(half) == 3 and len(load_batch_job(out)) == 3  # saved as it went
    seen = []
    resumed = batch_file(llama, pairs_file, out, resume=True, part_pairs=3,
                         progress=lambda done, total: seen.append(done))
    assert seen == [6, 9]  # only the pairs after the first three were run
    for found in (resumed, load_batch_job(out)):  # the same parts on the same path: equal to the bit
        assert found.pairs == through.pairs and found.patching.labels == through.patching.labels
        for result, names in (("attribution", ATTRIBUTION), ("patching", PATCHING)):
            for name in names:
                np.testing.assert_array_equal(getattr(getattr(found, result), name),
                                              getattr(getattr(through, result), name), err_msg=name)
    for other in ({"positions": "last"}, {"analyses": ("attribution",)}):
        with pytest.raises(ValueError, match="cannot be resumed"):
            batch_file(llama, pairs_file, out, resume=True, **other)
    other_pairs = tmp_path / "other.jsonl"
    other_pairs.write_text(write_prompt_pairs(MIXED))
    with pytest.raises(ValueError, match="cannot be resumed"):
        batch_file(llama, other_pairs, out, resume=True)


@pytest.mark.numeric
def test_parts_that_patch_other_positions_are_refused_and_last_tokens_merge(llama, tok, tmp_path):
    """Four aligned IOI pairs, then three of other lengths: with positions "auto" the first part patches every
    position and the second the last token only, which cannot merge; with "last" the job is the direct call."""
    pairs = PromptPairs(ioi_pairs(tok, 4, seed=1).rows + MIXED.rows, "mixed.jsonl")
    path = tmp_path / "mixed.jsonl"
    path.write_text(write_prompt_pairs(pairs))
    with pytest.raises(ValueError, match="pairs 5-7 patch the last token only.*--positions last"):
        batch_file(llama, path, tmp_path / "auto.safetensors", part_pairs=4)
    job = batch_file(llama, path, tmp_path / "last.safetensors", positions="last", part_pairs=4)
    assert_equals_direct(job, batch_attribution(llama, pairs), batch_patching(llama, pairs, positions="last"))
    assert job.patching.labels == ("last",)


def test_the_batch_command_says_what_is_wrong_without_a_traceback(pairs_file, tmp_path, capsys):
    from serving import main

    out = str(tmp_path / "x.safetensors")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"clean": "a", "corrupted": "b"}\n')
    text = tmp_path / "pairs.txt"
    text.write_text("a")
    for argv, says in (([str(tmp_path / "none.jsonl")], "no file"), ([str(pairs_file), "--model", "minilm"],
                       "minilm is not a decoder"), ([str(bad)], "bad.jsonl, line 1: no target, foil"),
                       ([str(text)], "read from .jsonl or .csv"), ([str(pairs_file), "--ray", "--workers", "0"],
                       "workers")):
        assert main(["batch", *argv, "--out", out]) == 2, argv
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err, err
    assert not Path(out).exists()


def _tiny_llama():
    """The tiny Llama of `build`, made again in a Ray worker (the same seed: the same weights)."""
    from tests.tiny_models import tokenizer

    return build("llama", tokenizer())[0]


def test_a_workers_error_on_ray_is_said_in_words():
    """What Ray raises when a worker fails (its traceback, the cause on the last line) becomes a ValueError."""
    ray = pytest.importorskip("ray")
    from attention.models.analyses.job_parts import failed_on_ray

    with pytest.raises(ValueError, match="^the batch job failed on Ray: ValueError: no such model here$"):
        with failed_on_ray():
            raise ray.exceptions.RayError("Traceback (most recent call last):\n  File x\n"
                                          "ValueError: no such model here\n")


@pytest.mark.slow
@pytest.mark.numeric
def test_the_job_on_ray_with_two_workers_equals_the_job_in_one_process(pairs_file, direct, tmp_path, monkeypatch):
    """Three pairs run here, the rest resumed on a local Ray cluster of 2 CPUs (parts back in any order, each
    worker its own replica): merged in file order, equal to the direct call. (A worker's failure in words: the
    corpus job's Ray test starts one; test_a_workers_error_on_ray_is_said_in_words holds the words.)"""
    import ray

    from attention.models import batch_file_on_ray

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))  # workers import tests
    out = tmp_path / "job.safetensors"
    batch_file(_tiny_llama(), pairs_file, out, part_pairs=3, stop_after=3)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        seen = []
        found = batch_file_on_ray(_tiny_llama, pairs_file, out, workers=2, resume=True, part_pairs=2,
                                  progress=lambda done, total: seen.append(done))
    finally:
        ray.shutdown()
    assert seen == [5, 7, 9]  # in file order, whatever order the parts came back in
    for again in (found, load_batch_job(out)):
        assert_equals_direct(again, *direct)
