"""The page "A batch of prompts" through AppTest, on a few IOI pairs of the bundled SmolLM2: m as the model's own
logits give it, each head's share as batch_attribution gives it, an upload it cannot read said in words, and
patching only from its button, its recovery exact where patching restores the whole clean run."""

import json

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from attention.models import batch_attribution, ioi_pairs, write_prompt_pairs
from tests.test_pages import APP, array, canvas, chart, table_with

pytestmark = pytest.mark.slow
PAGE = "pages/batch.py"


@pytest.fixture
def page(smollm2, monkeypatch):
    """A function opening the page with `n` IOI pairs, on the session's SmolLM2 (the page's model cache is filled
    from the fixture, not by a second load)."""
    import pages._jobs

    loaded = {"smollm2": smollm2}
    real = pages._jobs.load_model
    monkeypatch.setattr(pages._jobs, "load_model", lambda name, **kw: loaded.get(name) or real(name, **kw))

    def open_with(n: int) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.session_state["page.kept"] = {"batch.n": n}  # the page's kept choice (pages/_kept.py): n pairs, not 100
        at.run()
        at.switch_page(PAGE)
        at.run()
        assert not at.exception, at.exception
        return at
    return open_with


def own_m(loaded, pairs, which: str) -> np.ndarray:
    """m of each prompt from transformers' own causal LM, logit(target) − logit(foil) at the last token: one pass
    of the prompts stacked as they are (the template's prompts have one length: no padding, no mask)."""
    tok = loaded.tokenizer
    ids = torch.tensor(tok([getattr(row, which) for row in pairs])["input_ids"])  # (B, T): ragged would raise
    with torch.no_grad():
        logits = loaded.network(input_ids=ids).logits[:, -1].double()  # (B, V)
    ends = [[tok(w, add_special_tokens=False)["input_ids"][0] for w in (row.target, row.foil)] for row in pairs]
    picked = logits.gather(1, torch.tensor(ends))  # (B, 2)
    return (picked[:, 0] - picked[:, 1]).numpy()


def test_the_preset_shows_the_models_own_m_and_each_heads_share(page, smollm2):
    at = page(8)
    pairs = ioi_pairs(smollm2.tokenizer, 8, seed=0, corruption="abc")
    shown = table_with(at, "clean")
    assert list(shown["clean"]) == [r.clean for r in pairs] and list(shown["foil"]) == [r.foil for r in pairs]
    assert at.get("download_button")[0].proto.label.startswith("Download these pairs")
    assert at.get("download_button")[-1].proto.label.startswith("Download every prompt's values")  # batch_job_of
    clean, corrupted = own_m(smollm2, pairs, "clean"), own_m(smollm2, pairs, "corrupted")
    m = table_with(at, "m on").set_index("m on")
    for row, ref in (("clean prompts", clean), ("corrupted prompts", corrupted),
                     ("clean − corrupted", clean - corrupted)):
        np.testing.assert_allclose(m.loc[row, ["mean", "std", "min", "max"]].to_numpy(float),
                                   [ref.mean(), ref.std(), ref.min(), ref.max()], atol=2e-4)
    assert at.metric[0].value == f"{(clean > 0).mean():.0%}"
    strip = chart(at, "batch.m_strip")  # one point per clean prompt, then their mean, then the corrupted ones
    np.testing.assert_allclose(array(strip["data"][0]["x"]), clean, atol=2e-4)
    np.testing.assert_allclose(array(strip["data"][2]["x"]), corrupted, atol=2e-4)

    dla = batch_attribution(smollm2, pairs)
    np.testing.assert_allclose(canvas(at, "batch.direct").values, dla.heads.mean(0), atol=1e-5)
    heads = table_with(at, "towards the target")
    top = dla.top_heads(10)
    assert list(heads["head"]) == [str(h) for h, _ in top]
    first = dla.heads[:, top[0][0].layer, top[0][0].head]
    np.testing.assert_allclose(heads.iloc[0][["mean", "std", "min", "max"]].to_numpy(float),
                               [first.mean(), first.std(), first.min(), first.max()], atol=1e-4)
    # the head of largest mean share opens below; ticking the table's third row opens that one
    assert (at.number_input(key="batch.layer").value, at.number_input(key="batch.head").value) == \
        (top[0][0].layer + 1, top[0][0].head + 1)
    layer, head = top[0][0]
    at.session_state[f"batch.heads.{layer}.{head}"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert (at.number_input(key="batch.layer").value, at.number_input(key="batch.head").value) == \
        (top[2][0].layer + 1, top[2][0].head + 1)
    assert not at.exception


def test_an_upload_it_cannot_read_is_said_and_a_good_one_is_read(page, smollm2):
    at = page(4)
    at.segmented_control(key="batch.source").set_value("file").run()
    assert not at.exception and at.info  # nothing uploaded yet: what to upload
    bad = json.dumps({"clean": "When Mary and John went out, John gave it to", "corrupted": "x", "target": " Mary"})
    at.file_uploader(key="batch.file").set_value(("pairs.jsonl", bad.encode(), "application/jsonl")).run()
    assert not at.exception
    assert at.error and "pairs.jsonl, line 1: no foil" in at.error[0].value.replace("\\", "")  # as md() escaped it
    at.file_uploader(key="batch.file").set_value(("pairs.csv", b"\xff\xfe\x00garbage", "text/csv")).run()
    assert not at.exception and at.error and "is not UTF-8 text" in at.error[0].value.replace("\\", "")
    at.file_uploader(key="batch.file").set_value(("pairs.jsonl", b"{not json\n", "application/jsonl")).run()
    assert not at.exception and at.error and "line 1 is not JSON" in at.error[0].value.replace("\\", "")
    good = write_prompt_pairs(ioi_pairs(smollm2.tokenizer, 3, seed=5, corruption="swap"))
    at.file_uploader(key="batch.file").set_value(("mine.jsonl", good.encode(), "application/jsonl")).run()
    assert not at.exception and not at.error
    assert len(table_with(at, "corrupted")) == 3
    m = table_with(at, "m on").set_index("m on")
    assert m.loc["corrupted prompts", "mean"] < 0 < m.loc["clean prompts", "mean"]  # swapped: the foil preferred
    at.switch_page("pages/lookup.py").run()  # away and back: the file and the choice of it hold
    at.switch_page(PAGE).run()
    assert not at.exception and at.segmented_control(key="batch.source").value == "file"
    assert len(table_with(at, "corrupted")) == 3 and any("mine.jsonl" in c.value.replace("\\", "") for c in at.caption)


def test_the_presets_choices_hold_when_the_visitor_leaves_and_comes_back(page):
    at = page(4)
    at.selectbox(key="batch.corruption").set_value("xyz").run()
    at.number_input(key="batch.seed").set_value(3).run()
    assert not at.exception
    at.switch_page("pages/lookup.py").run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert (at.selectbox(key="batch.corruption").value, at.number_input(key="batch.seed").value,
            at.number_input(key="batch.n").value) == ("xyz", 3, 4)


def test_patching_runs_from_its_button_and_restores_all_where_the_whole_clean_run_is_patched(page):
    at = page(3)
    with pytest.raises(KeyError):
        canvas(at, "batch.patching")  # never started on page load
    at.button(key="batch.patch").click().run()
    assert not at.exception, at.exception
    recovery = canvas(at, "batch.patching")
    values = recovery.values  # (L + 1, P): the stream entering each layer, then the final one
    assert values.shape == (31, 14)
    labels = [name.split(" ", 1)[1] for name in recovery.x_names]
    s2 = labels.index("S2")  # ABC: the prompts differ at S2 only
    np.testing.assert_array_equal(values[:, :s2], 0.0)  # before it the two runs are one
    np.testing.assert_allclose(values[0, s2], 1.0, atol=1e-4)  # the embedding at S2: the corrupted prompt is the clean
    np.testing.assert_allclose(values[-1, -1], 1.0, atol=1e-4)  # the final stream at the last token: the clean logits
    table = table_with(at, "most at").set_index("position")
    assert list(table.index) == list(recovery.x_names[s2:])  # every position from the first difference on
    assert table.loc[recovery.x_names[s2], "mean"] == pytest.approx(values[:, s2].max(), abs=1e-6)
    assert table.loc[recovery.x_names[s2], "recovery ≥ 0.5"].startswith("L1 to ")
    at.number_input(key="batch.head").set_value(2).run()  # a rerun keeps the patching shown, not run again
    assert not at.exception and canvas(at, "batch.patching").values.shape == (31, 14)


def test_an_encoder_is_turned_away_in_words(page, smollm2, minilm, monkeypatch):
    import pages._jobs

    monkeypatch.setattr(pages._jobs, "load_model", lambda name, **kw: {"smollm2": smollm2, "minilm": minilm}[name])
    at = page(2)
    at.selectbox(key="batch.model").set_value("minilm").run()
    assert not at.exception
    assert any("predicts no next token" in i.value for i in at.info)


def test_every_unreadable_file_is_a_value_error_that_says_where():
    """What the page shows as an error box: read_prompt_pairs raises ValueError, never csv's or json's own."""
    from attention.models import read_prompt_pairs

    huge = b"clean,corrupted,target,foil\n\"" + b"a" * 200_000 + b"\",b,c,d\n"  # over csv's field limit
    for name, data, said in (("big.csv", huge, "big.csv: field larger"),
                             ("two.jsonl", b'{"clean": "a", "corrupted": "b", "target": " c", "foil": " d"}\n{oops\n',
                              "two.jsonl, line 2 is not JSON"),
                             ("both.jsonl", b'{"clean": "a", "corrupted": "b", "target": " c"}\n{oops\n',
                              "both.jsonl: 2 lines cannot be read: line 1: no foil.*; line 2 is not JSON"),
                             ("latin.csv", "clean,corrupted,target,foil\né,e,a,b\n".encode("latin-1"), "not UTF-8")):
        with pytest.raises(ValueError, match=said):
            read_prompt_pairs(name, data)
