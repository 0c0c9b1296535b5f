"""A head across a corpus: the survey held to the model's own eager attention text by text, its file, the
corpus files users bring, the projection, and the page."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from attention.models import (
    attend,
    corpus_survey,
    default_corpus,
    load_corpus_survey,
    qk_projection,
    read_corpus,
    survey,
    survey_bytes,
)
from tests.numerics import assert_float32_close
from tests.tiny_models import SMALL, build, own_attentions

WIDTH = SMALL["hidden_size"]  # the tiny families' model width: the sums behind every number here
TEXTS = [  # 20 texts: short and long, repeats, names, numbers, code
    "I sat on the river bank.", "I paid money into the bank.", "The animal didn't cross the street because it "
    "was too tired.", "When Mary and John went to the store, John gave a drink to Mary.", "1, 2, 3, 4, 5, 6, 7",
    "red green blue red green blue", "def f(x):\n    return x + 1", "The cat sat on the mat.", "Paris is in France.",
    "a b c d e f g a b c d e f g", "She went home.", "It rained.", "The trophy didn't fit in the suitcase because "
    "it was too big.", "apples, pears and plums", "Hello!", "one two three one two three one two three",
    "The quick brown fox jumps over the lazy dog.", "2 + 2 = 4", "Bob gave Alice a book.", "Water boils at 100 C.",
]


@pytest.fixture(scope="module", params=["bert", "llama"])
def surveyed(request, tok):
    """(loaded, reference, survey) for a tiny encoder and a tiny decoder (grouped-query heads) over TEXTS."""
    loaded, reference = build(request.param, tok)
    return loaded, reference, corpus_survey(loaded, TEXTS, k=7, sample=60)


def _brute_force_top(loaded, reference, k: int) -> tuple[np.ndarray, list]:
    """Every (weight, text, query, key) from each text's own eager output_attentions, the same keys skipped
    (special tokens and the first token), the k largest per head: (L, H, k) weights and the candidates."""
    per_head = {}
    for i, text in enumerate(TEXTS):
        att = attend(loaded, text)
        own = own_attentions(reference, att)  # per layer (H, n, n), the model's own eager kernel
        skip = np.asarray(att.special, bool).copy()
        skip[0] = True
        for layer, w in enumerate(own):
            for head in range(w.shape[0]):
                q, j = np.nonzero(np.ones_like(w[head], bool) & ~skip[None, :])
                per_head.setdefault((layer, head), []).extend(zip(w[head, q, j], [i] * len(q), q, j, strict=True))
    L = len(own)
    H = own[0].shape[0]
    top = np.zeros((L, H, k))
    for (layer, head), found in per_head.items():
        top[layer, head] = sorted((float(x[0]) for x in found), reverse=True)[:k]
    return top, per_head


def test_top_examples_are_the_largest_eager_weights_of_the_corpus(surveyed):
    loaded, reference, found = surveyed
    top, candidates = _brute_force_top(loaded, reference, 7)
    np.testing.assert_allclose(found.top_weight, top, atol=1e-5)
    for layer in range(found.n_layers):
        for head in range(found.n_heads):
            weights = {(t, int(q), int(j)): w for w, t, q, j in candidates[layer, head]}
            for example in found.top_examples(layer, head):
                assert example.key != 0 and not found.tokens[example.text_index][example.key].startswith("[")
                assert weights[example.text_index, example.query, example.key] == pytest.approx(example.weight,
                                                                                                abs=1e-5)


def test_the_distributions_are_each_texts_own_survey(surveyed):
    loaded, _, found = surveyed
    for i in (0, 6, 19):
        alone = survey(attend(loaded, TEXTS[i]))
        for name, values in found.statistics.items():  # texts in a batch of parts, or alone: other sums
            assert_float32_close(values[i], getattr(alone, name), terms=WIDTH, err_msg=name)


def test_the_sample_holds_the_queries_and_keys_at_its_positions(surveyed):
    loaded, _, found = surveyed
    assert len(found.sample_text) == 60 and found.q_sample.shape[2] == 60
    for slot in (0, 31, 59):
        att = attend(loaded, TEXTS[found.sample_text[slot]])
        position = found.sample_position[slot]
        assert not att.special[position]
        np.testing.assert_allclose(found.q_sample[:, :, slot], att.self_attn.q[:, :, position], atol=2e-3, rtol=2e-3)
        np.testing.assert_allclose(found.k_sample[:, :, slot], att.self_attn.k[:, :, position], atol=2e-3, rtol=2e-3)


def test_the_sample_is_the_lowest_priorities_of_every_position_of_the_corpus(surveyed):
    """The positions kept are, of every non-special position of every text, the 60 whose priority (drawn from a
    generator seeded by (seed, text)) is lowest, in priority order: whatever the order texts were merged in."""
    loaded, _, found = surveyed
    drawn = []
    for i, text in enumerate(TEXTS):
        special = np.asarray(attend(loaded, text).special, bool)
        priority = np.random.default_rng([0, i]).random(len(special))
        drawn += [(priority[j], i, j) for j in np.flatnonzero(~special)]
    lowest = sorted(drawn)[:60]
    assert [(t, j) for _, t, j in lowest] == list(zip(found.sample_text.tolist(), found.sample_position.tolist(),
                                                      strict=True))
    np.testing.assert_array_equal(found.sample_priority, [p for p, _, _ in lowest])


def test_the_projection_keeps_every_softmax_row(surveyed):
    """The keys' translation and the scaling change each query's scores by one constant per query: the weights
    over the sampled keys are the same before and after; and the queries and keys share one PCA."""
    _, _, found = surveyed
    p = qk_projection(found, 1, 1)
    group = found.q_sample.shape[1] // found.k_sample.shape[1]
    q = found.q_sample[1, 1].astype(np.float64)
    k = found.k_sample[1, 1 // group].astype(np.float64)
    moved = k - k.mean(0) + q.mean(0)
    before = torch.softmax(torch.from_numpy(q @ k.T), -1)
    after = torch.softmax(torch.from_numpy((q * p.scale) @ (moved / p.scale).T), -1)
    torch.testing.assert_close(after, before)
    assert p.queries.shape == p.keys.shape == (60, 2) and 0 < p.explained[1] <= p.explained[0] <= 1
    assert qk_projection(found, 1, 1) is p  # kept: a hover never recomputes it


def test_a_saved_survey_reopens_equal_and_a_bad_file_gets_a_message(surveyed, tmp_path):
    from safetensors.numpy import save

    _, _, found = surveyed
    path = tmp_path / "survey.safetensors"
    found.save(path)
    back = load_corpus_survey(path)
    assert back.texts == found.texts and back.tokens == found.tokens and back.model_name == found.model_name
    for name in ("top_text", "top_query", "top_key", "top_weight", "sample_text", "q_sample", "k_sample"):
        np.testing.assert_array_equal(getattr(back, name), getattr(found, name), err_msg=name)
    for name, values in found.statistics.items():
        np.testing.assert_array_equal(back.statistics[name], values)
    data = survey_bytes(found)
    for bad, says in ((data[:len(data) // 2], "not a saved corpus survey"), (data[:5], "too short"),
                      (pickle.dumps({"top_weight": found.top_weight}), "not a saved corpus survey"),
                      (save({"top_weight": found.top_weight}), "holds no corpus survey")):
        with pytest.raises(ValueError, match=says):
            load_corpus_survey(bad)


def test_a_survey_is_made_once_per_machine_and_only_for_what_made_it(tok, tmp_path, monkeypatch):
    """The corpus page's survey is kept on disk: the same model, texts, settings and code read it back (the
    survey is not run again); another text, another setting or changed code make a new one; a file that cannot
    be read is made again; a cache folder that cannot be written still gives the survey."""
    import importlib

    cache = importlib.import_module("attention.models.analyses.survey_cache")
    loaded, _ = build("bert", tok)
    texts = TEXTS[:5]
    made = cache.cached_survey(loaded, texts, folder=tmp_path)
    files = sorted(tmp_path.glob("*.safetensors"))
    assert len(files) == 1 and not list(tmp_path.glob("*.part"))

    def not_again(*args, **kwargs):
        raise AssertionError("surveyed again")
    monkeypatch.setattr(cache, "corpus_survey", not_again)
    again = cache.cached_survey(loaded, texts, folder=tmp_path)
    assert again.texts == made.texts and again.tokens == made.tokens
    for name in ("top_weight", "top_text", "top_query", "top_key", "sample_position", "q_sample", "k_sample"):
        np.testing.assert_array_equal(getattr(again, name), getattr(made, name), err_msg=name)
    with pytest.raises(AssertionError, match="surveyed again"):  # another corpus, another setting: another survey
        cache.cached_survey(loaded, [*texts[:4], "Another text."], folder=tmp_path)
    with pytest.raises(AssertionError, match="surveyed again"):
        cache.cached_survey(loaded, texts, include_sinks=True, folder=tmp_path)
    monkeypatch.setattr(cache, "code_digest", lambda: "changed code")
    with pytest.raises(AssertionError, match="surveyed again"):
        cache.cached_survey(loaded, texts, folder=tmp_path)
    monkeypatch.undo()
    files[0].write_bytes(b"not a survey")  # a broken file: made again, and replaced
    assert cache.cached_survey(loaded, texts, folder=tmp_path).texts == tuple(texts)
    assert load_corpus_survey(files[0]).texts == tuple(texts)
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    assert cache.cached_survey(loaded, texts, folder=blocked).texts == tuple(texts)


def test_corpus_files_of_three_kinds_and_their_messages():
    assert read_corpus("a.txt", b"one text\n\nanother\r\n\r\nthird\n").texts == ("one text", "another", "third")
    assert read_corpus("a.jsonl", b'{"text": "x y"}\n\n{"text": "z", "id": 2}\n').texts == ("x y", "z")
    assert read_corpus("a.csv", b"id,text\n1,hello\n2,\"a, b\"\n").texts == ("hello", "a, b")
    long = read_corpus("a.txt", ("w " * 5_000).encode())
    assert long.cut == 1 and len(long.texts[0]) == 2_000
    for name, data, says in (("a.pdf", b"x", "not “.pdf”"), ("a.txt", b"\xff\xfe\x00bad", "not UTF-8"),
                             ("a.txt", b"\n\n  \n", "no text"), ("a.jsonl", b"{oops", "line 1 is not JSON"),
                             ("a.jsonl", b'{"body": "x"}', "no \"text\" field"), ("a.csv", b"a,b\n1,2", "no \"text\""),
                             ("a.txt", b"x\n\n" * 6_000, "at most 5,000")):
        with pytest.raises(ValueError, match=says):
            read_corpus(name, data)
    assert len(default_corpus().texts) >= 250


@pytest.mark.numeric
def test_a_job_stopped_half_way_resumes_to_the_survey_of_one_run(tok, tmp_path):
    from attention.models import survey_file

    loaded, _ = build("llama", tok)
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n\n".join(TEXTS))
    whole = corpus_survey(loaded, TEXTS, k=5, sample=40)
    out = tmp_path / "job.safetensors"
    half = survey_file(loaded, corpus, out, k=5, sample=40, part_texts=4, stop_after=10)
    assert len(half.texts) == 10 and len(load_corpus_survey(out).texts) == 10  # saved as it went
    seen = []
    resumed = survey_file(loaded, corpus, out, resume=True, k=5, sample=40, part_texts=4,
                          progress=lambda done, total, tokens: seen.append(done))
    assert seen == [14, 18, 20]  # only the texts after the first ten were read
    for found in (resumed, load_corpus_survey(out)):
        assert found.texts == whole.texts and found.tokens == whole.tokens
        assert_float32_close(found.top_weight, whole.top_weight, terms=WIDTH, magnitude=1.0)
        np.testing.assert_array_equal(found.top_text >= 0, whole.top_text >= 0)
        for name in ("sample_text", "sample_position", "q_sample", "k_sample"):
            np.testing.assert_array_equal(getattr(found, name), getattr(whole, name), err_msg=name)
        for name, values in whole.statistics.items():
            assert_float32_close(found.statistics[name], values, terms=WIDTH, err_msg=name)
    other, _ = build("bert", tok)
    with pytest.raises(ValueError, match="cannot be resumed"):
        survey_file(other, corpus, out, resume=True, k=5, sample=40)


def _tiny_llama():
    """The tiny Llama of `build`, made again in a Ray worker (the same seed: the same weights)."""
    from tests.tiny_models import tokenizer

    return build("llama", tokenizer())[0]


@pytest.mark.slow
def test_the_job_on_ray_with_two_workers_ends_equal_to_one_process(tok, tmp_path, monkeypatch):
    """Half the corpus surveyed here, the rest resumed on a local Ray cluster of 2 CPUs (parts back in any
    order, each worker its own replica): the saved survey equals one in-process run. A worker whose model
    does not load fails the job with the cause in words."""
    import ray

    from attention.models import survey_file, survey_file_on_ray

    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[1]))  # workers import tests and benchmarks
    corpus = tmp_path / "texts.txt"
    corpus.write_text("\n\n".join(TEXTS))
    whole = corpus_survey(build("llama", tok)[0], TEXTS, k=5, sample=40)
    out = tmp_path / "job.safetensors"
    survey_file(_tiny_llama(), corpus, out, k=5, sample=40, part_texts=4, stop_after=8)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        seen = []
        found = survey_file_on_ray(_tiny_llama, corpus, out, workers=2, resume=True, k=5, sample=40,
                                   part_texts=3, progress=lambda done, total, tokens: seen.append(done))
        with pytest.raises(ValueError, match="failed on Ray.*no such model"):
            survey_file_on_ray(_no_model, corpus, tmp_path / "other.safetensors", workers=1, k=5, sample=40)
    finally:
        ray.shutdown()
    assert seen == [11, 14, 17, 20]  # in corpus order, whatever order the parts came back in
    for again in (found, load_corpus_survey(out)):
        assert again.texts == whole.texts and again.tokens == whole.tokens
        # (equal weights may swap) each worker its own process and threads: sums in their own orders
        assert_float32_close(again.top_weight, whole.top_weight, terms=WIDTH, magnitude=1.0)
        np.testing.assert_array_equal(again.top_text >= 0, whole.top_text >= 0)
        for name in ("sample_text", "sample_position", "q_sample", "k_sample"):
            np.testing.assert_array_equal(getattr(again, name), getattr(whole, name), err_msg=name)
        for name, values in whole.statistics.items():
            assert_float32_close(again.statistics[name], values, terms=WIDTH, err_msg=name)


def _no_model():
    raise ValueError("no such model here")


def test_the_corpus_command_says_what_is_wrong_without_a_traceback(tmp_path, capsys):
    from serving import main

    bad = tmp_path / "texts.pdf"
    bad.write_bytes(b"%PDF")
    assert main(["corpus", str(bad), "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "a corpus is a .txt, .jsonl, .csv file" in capsys.readouterr().err


def test_an_operators_corpus_folders_are_listed_and_nothing_outside_them(tmp_path, monkeypatch):
    from attention.models import listed_corpora, open_listed

    root, outside = tmp_path / "corpora", tmp_path / "private"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "news.txt").write_text("one\n\ntwo")
    (root / "sub" / "lines.jsonl").write_text('{"text": "three"}')
    (root / "notes.md").write_text("not a corpus")
    (outside / "secret.txt").write_text("secret")
    (root / "link.txt").symlink_to(outside / "secret.txt")
    monkeypatch.setenv("ATTENTION_EXPLORER_CORPUS_DIRS", str(root))
    assert list(listed_corpora()) == ["corpora/news.txt", "corpora/sub/lines.jsonl"]
    assert open_listed("corpora/news.txt").texts == ("one", "two")
    for name in ("corpora/link.txt", "../private/secret.txt", "corpora/notes.md"):
        with pytest.raises(ValueError, match="not a corpus this server lists"):
            open_listed(name)


@pytest.mark.slow
def test_the_corpus_page_shows_the_map_examples_and_projection_and_opens_an_example():
    """A visitor who typed a sentence of their own on Model heads picks a top example here: Model heads opens on
    that example's text (not the visitor's), at this head, its query token followed (issue 42: it opened the
    visitor's sentence with an unrelated token picked)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../app.py", default_timeout=600)
    at.run()
    at.switch_page("pages/model_heads.py").run()
    at.text_area(key="heads.text").set_value("My own sentence, which fits nothing in the corpus.").run()
    at.switch_page("pages/corpus.py").run()
    assert not at.exception and not at.error
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 3  # the map, the queries and keys, the distribution
    assert len(specs[0]["data"][0]["customdata"]["shape"].split(",")) == 2 or specs[0]["data"][0]["customdata"]
    at.number_input(key="corpus.layer").set_value(3).run()
    at.number_input(key="corpus.head").set_value(4).run()
    assert not at.exception
    frame = at.dataframe(key="corpus.examples")
    assert len(frame.value) == 20
    first = frame.value.iloc[0]
    assert "«" in first["in context («query», [key])"] and "[" in first["in context («query», [key])"]
    # A click on a row opens Model heads on that text, at this layer and head, its query followed.
    query = first["query"]
    state = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.session_state["corpus.examples"] = state
    at.run()
    assert not at.exception and at.title[0].value == "Model heads"
    text = at.text_area(key="heads.text").value
    assert text in default_corpus().texts
    assert at.number_input(key="heads.layer").value == 3 and at.number_input(key="heads.head").value == 4
    picked = next(s for s in at.selectbox if s.label == "Token")
    assert picked.options[picked.index].split(": ", 1)[1] == query  # the example's query token, followed
    from tests.test_pages import canvas

    assert query in canvas(at, "heads.focus").title


@pytest.mark.slow
def test_the_corpus_page_reads_a_listed_corpus_and_says_what_is_wrong_with_an_upload(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "two.txt").write_text("The cat sat on the mat.\n\nThe dog sat on the log.")
    monkeypatch.setenv("ATTENTION_EXPLORER_CORPUS_DIRS", str(tmp_path / "mine"))
    at = AppTest.from_file("../app.py", default_timeout=600)
    at.run()
    at.switch_page("pages/corpus.py").run()
    at.button_group(key="corpus.source").set_value("listed").run()
    assert not at.exception and not at.error
    assert at.selectbox(key="corpus.listed").value == "mine/two.txt"
    assert any("read 2 texts of two.txt" in c.value.replace("\\", "") for c in at.caption)
