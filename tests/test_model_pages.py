"""The pretrained-model pages through AppTest, on the bundled MiniLM."""

import numpy as np
import pytest

from attention.models import attend
from pages._site import SECTIONS
from tests.numerics import assert_float32_close
from tests.test_pages import array, canvas, chart, open_page, table_with

pytestmark = pytest.mark.slow
# Every page of the site list's "Pretrained models" (pages/_site.py), so a new one is opened here without an edit;
# but those whose first run is a long job of their own, each opened by its own test file:
OWN_TESTS = {"pages/compare.py": "tests/test_comparison.py", "pages/image_model.py": "tests/test_images.py",
             "pages/corpus.py": "tests/test_corpus.py", "pages/batch.py": "tests/test_batch_page.py"}
MODEL_PAGES = [e.path for e in SECTIONS["Pretrained models"] if e.path not in OWN_TESTS]


@pytest.mark.parametrize("path", MODEL_PAGES)
def test_model_page_renders(path):
    at = open_page(path)
    assert at.get("plotly_chart") or at.get("bidi_component")  # Plotly's charts, or canvas heatmaps
    assert not at.error


def test_model_heads_grid_and_zoom_follow_the_sentence():
    at = open_page("pages/model_heads.py")
    grid = canvas(at, "heads.grid").values
    assert grid.shape[0] > 6 and np.nanmax(grid) <= 1.0
    at.text_area(key="heads.text").set_value("Hello world").run()
    zoom = canvas(at, "heads.zoom").values
    assert zoom.shape == (4, 4)  # [CLS] hello world [SEP]
    np.testing.assert_allclose(zoom.sum(-1), 1.0, atol=1e-5)
    at.toggle(key="heads.hide_special").set_value(True).run()
    zoom = canvas(at, "heads.zoom").values
    assert zoom.shape == (2, 2)
    np.testing.assert_allclose(zoom.sum(-1), 1.0, atol=1e-5)
    at.selectbox(key="heads.agg").set_value("rollout").run()
    assert not at.exception


def test_inside_head_matches_the_models_weights():
    at = open_page("pages/inside_head.py")
    table = table_with(at, "softmax weight")
    np.testing.assert_allclose(table["softmax weight"], table["model's own weight"], atol=1e-4)
    np.testing.assert_allclose(table["softmax weight"].sum(), 1.0, atol=1e-5)
    at.number_input(key="inside.layer").set_value(4).run()
    at.number_input(key="inside.head").set_value(7).run()
    table2 = table_with(at, "softmax weight")
    assert not np.allclose(table["softmax weight"], table2["softmax weight"])
    np.testing.assert_allclose(table2["softmax weight"], table2["model's own weight"], atol=1e-4)
    assert not [m for m in at.metric if m.label == "Sum of the parts"]  # folded for researchers: nothing run
    at.session_state["inside.why"] = True  # the reader opens "Why this key"
    at.run()
    _why_this_key_shows_the_sum_beside_the_score(at)
    at.selectbox(key="inside.model").set_value("smollm2").run()
    _why_this_key_shows_the_sum_beside_the_score(at)
    at.radio(key="inside.against").set_value("the mean over the keys it sees").run()
    _why_this_key_shows_the_sum_beside_the_score(at)
    at.toggle(key="inside.per_head").set_value(False).run()
    assert any("heads" in y for y in chart(at, "inside.qk")["layout"]["yaxis"]["ticktext"])  # a layer's heads, one part


def _why_this_key_shows_the_sum_beside_the_score(at):
    """Section 6: the sum of the pairs and the model's own score side by side, and equal; a heatmap of pairs."""
    assert not at.exception, at.exception
    shown = {m.label: float(m.value) for m in at.metric}
    total = shown["Sum of the parts"]
    score = next(v for k, v in shown.items() if k.startswith("Model's"))
    assert total == pytest.approx(score, abs=2e-4)
    pairs = array(chart(at, "inside.qk")["data"][0]["z"])
    assert pairs.ndim == 2 and np.nansum(pairs) + shown["Constant terms"] == pytest.approx(total,
                                                                                                        abs=1e-3)


def test_ambiguous_words_pairs():
    at = open_page("pages/ambiguous_words.py")
    shift = array(chart(at, "amb.shift")["data"][0]["z"])
    assert shift.shape == (6, 12) and np.all((shift >= 0) & (shift <= 1))
    at.selectbox(key="amb.example").set_value("it").run()
    cosine = array(chart(at, "amb.cosine")["data"][0]["y"])
    assert cosine.shape == (7,) and cosine[-1] < 1.0
    at.text_input(key="amb.word").set_value("zebra").run()
    assert at.warning and "not among the tokens" in at.warning[0].value


def eager_entropies(text: str) -> np.ndarray:
    """Each MiniLM head's mean row entropy (nats) on `text`, from the model's own eager attentions (a copy
    loaded here, not the app's). Shapes: -> (L, H)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from attention.models.forward.bundled import minilm_dir

    model = AutoModel.from_pretrained(minilm_dir(), attn_implementation="eager").eval()
    ids = AutoTokenizer.from_pretrained(minilm_dir())(text, return_tensors="pt")
    with torch.no_grad():
        w = torch.stack(model(**ids, output_attentions=True).attentions)[:, 0].double()  # (L, H, n, n)
    return (-(w * torch.log(w.clamp_min(1e-30))).sum(-1)).mean(-1).numpy()


def test_head_atlas_and_hub_refusal(monkeypatch):
    at = open_page("pages/head_atlas.py")
    ent = canvas(at, "atlas.metric").values
    assert ent.shape == (6, 12) and np.all(ent >= 0)
    np.testing.assert_allclose(ent, eager_entropies(at.text_area(key="atlas.text").value), rtol=1e-4, atol=1e-5)
    assert canvas(at, "atlas.metric").click == "cell"  # a click on a head opens it below
    at.selectbox(key="atlas.model").set_value("other (Hugging Face id)…").run()
    at.text_input(key="atlas.hub_id").set_value("someone/unknown-model").run()
    assert at.error and "allowlist" in at.error[0].value


def test_model_heads_shows_cross_attention_of_an_encoder_decoder_model(monkeypatch):
    """An online user's Marian model, played by a tiny random one: the cross-attention chart shows the
    model's own cross_attentions (from a plain eager twin), for the target the user typed."""
    import torch
    from transformers import AutoTokenizer

    from attention.models.forward.bundled import minilm_dir
    from pages._widgets import DEFAULT_TEXT, OTHER
    from tests.test_models import tiny

    loaded, reference = tiny("marian", AutoTokenizer.from_pretrained(minilm_dir()))
    monkeypatch.setattr("pages._jobs.load_model", lambda name, **kw: loaded)
    at = open_page("pages/model_heads.py")
    at.selectbox(key="heads.model").set_value(OTHER).run()
    at.text_input(key="heads.hub_id").set_value("tiny/marian").run()
    assert not at.exception and chart(at, "heads.cross")  # the model's own translation first
    at.text_input(key="heads.decoder_text").set_value("le chat").run()
    at.number_input(key="heads.layer").set_value(2).run()
    at.number_input(key="heads.head").set_value(3).run()
    shown = array(chart(at, "heads.cross")["data"][0]["z"])
    att = attend(loaded, DEFAULT_TEXT, decoder_text="le chat")
    with torch.no_grad():
        out = reference(input_ids=torch.tensor(att.token_ids)[None],
                        decoder_input_ids=torch.tensor(att.target_ids)[None], output_attentions=True)
    np.testing.assert_allclose(shown, out.cross_attentions[1][0, 2].numpy(), atol=1e-5)
    assert shown.shape == (len(att.target_tokens), len(att.tokens))


def test_predictions_page_tells_the_story_from_prediction_to_heads():
    at = open_page("pages/predictions.py")
    assert at.selectbox(key="pred.model").value == "smollm2"  # opened from the menu: the bundled decoder
    next_chart = chart(at, "pred.next")
    assert next_chart["layout"]["xaxis"]["ticktext"][0] == "“␣Mary”"  # the token's space, shown
    assert array(next_chart["data"][0]["y"])[0] == pytest.approx(0.92, abs=0.03)
    estimate = array(chart(at, "pred.estimate")["data"][0]["z"])
    assert estimate.shape == (30, 9)
    at.button(key="pred.scan").click().run()
    exact = array(chart(at, "pred.exact")["data"][0]["z"])
    assert exact.shape == (30, 9) and np.isfinite(exact).all()
    ranked = table_with(at, "m falls by (exact)")
    assert abs(ranked["m falls by (exact)"].iloc[0]) == pytest.approx(np.abs(exact).max(), abs=1e-3)  # largest first
    ranks = [np.argsort(np.argsort(a.ravel(), kind="stable"), kind="stable") for a in (estimate, exact)]
    rho = next(c.value for c in at.caption if "Spearman" in c.value)
    assert f"ρ = {np.corrcoef(*ranks)[0, 1]:.2f}" in rho  # the two charts' own rank correlation
    at.text_input(key="pred.foil").set_value(" Mary").run()
    assert any("same token" in w.value for w in at.warning)
    at.text_input(key="pred.target").set_value("").run()
    assert any("empty" in w.value for w in at.warning)
    at.selectbox(key="pred.model").set_value("minilm").run()
    assert "encoder" in at.info[0].value  # MiniLM predicts no next token
    assert chart(at, "pred.vector")  # its heads measured on a word's vector instead
    at.button(key="pred.decoder").click().run()
    assert at.selectbox(key="pred.model").value == "smollm2" and not at.exception


def test_positions_page_reads_a_smollm2_head_through_its_rotary_positions(smollm2):
    from attention.models.forward.model import rotary_base
    from attention.models.recorded.rotary import rotary_view

    at = open_page("pages/positions.py")
    at.toggle(key="pos.real").set_value(True).run()
    assert not at.exception and not at.error
    text = at.text_input(key="pos.text").value
    att = attend(smollm2, text)
    query, key = (next(s for s in at.selectbox if s.label == label).value for label in ("Query token", "Key token"))
    view = rotary_view(att, rotary_base(smollm2), 0, 0, query, key)  # layer 1, head 1 on screen
    shown = {m.label: float(m.value) for m in at.metric if "rotation" in m.label}
    assert shown["after rotation"] == pytest.approx(view.rotated_score, abs=1e-3)
    assert array(chart(at, "pos.distance")["data"][0]["y"])[view.distance] == pytest.approx(view.rotated_score,
                                                                                           abs=1e-4)


def test_word_view_and_sinks_on_every_page_that_draws_weights(minilm):
    from attention.models.recorded.words import word_level

    text = "The unbelievably tired cat sat on the riverbank."
    at = open_page("pages/model_heads.py")
    at.text_area(key="heads.text").set_value(text).run()
    at.toggle(key="heads.words").set_value(True).run()
    wa = word_level(attend(minilm, text))
    zoom = canvas(at, "heads.zoom")
    np.testing.assert_allclose(zoom.values, wa.weights[0, 0], atol=1e-5)
    assert "unbelievably" in zoom.x_names and not at.exception
    at.toggle(key="heads.log").set_value(True).run()
    assert canvas(at, "heads.zoom").colorbar[-1][1] == "1" and not at.exception
    for path, slot, key in (("pages/inside_head.py", "inside", "inside.reread"),
                            ("pages/ambiguous_words.py", "amb", "amb.barA"), ("pages/predictions.py", "pred", None)):
        at.switch_page(path).run()
        at.toggle(key=f"{slot}.no_sinks").set_value(True).run()
        assert not at.exception, (path, at.exception)
        assert at.toggle(key=f"{slot}.words").value  # the visit's focus, set on Model heads
        if key:
            bars = array(chart(at, key)["data"][0]["y"])
            assert bars.sum() == pytest.approx(1.0, abs=1e-4) and len(bars) < len(attend(minilm, text).tokens)


def test_line_view_draws_the_heads_weights(minilm):
    text = "The cat sat on the mat."
    at = open_page("pages/model_heads.py")
    at.text_area(key="heads.text").set_value(text).run()
    assert not [c for c in at.get("plotly_chart") if "heads.lines" in c.proto.id]  # off until asked
    at.toggle(key="heads.show_lines").set_value(True).run()
    fig = chart(at, "heads.lines")
    w = attend(minilm, text).head_weights(0, 0)
    hovers = [h for trace in fig["data"] if trace.get("hovertext") for h in trace["hovertext"]]
    assert len(hovers) == int((w >= 0.01).sum())  # one line per pair of at least 0.01 (8 tokens: all kept)
    assert any(f"weight {w.max():.3f}" in h for h in hovers)


def test_an_operators_folders_open_in_the_app_and_a_family_without_q_k_v_says_so(tmp_path, monkeypatch):
    """Tiny Pythia (GPT-NeoX: rebuilt from q and k) and BLOOM (outside the attention interface: its own
    weights) saved under a root the operator allows: picked from the list, never typed as a path."""
    from tests.tiny_models import build, tokenizer

    tok = tokenizer()
    for name in ("gpt_neox", "bloom"):
        _, reference = build(name, tok)
        reference.save_pretrained(tmp_path / "tiny" / name)
        tok.save_pretrained(tmp_path / "tiny" / name)
    monkeypatch.setenv("ATTENTION_EXPLORER_MODEL_DIRS", str(tmp_path / "tiny"))
    at = open_page("pages/model_heads.py")
    assert "tiny/gpt_neox (local folder)" in at.selectbox(key="heads.model").options
    at.selectbox(key="heads.model").set_value("local:tiny/gpt_neox").run()
    assert not at.exception and canvas(at, "heads.grid")
    assert any("Exact: equals the model's own attention" in c.value for c in at.caption)  # the guard's gap
    at.switch_page("pages/predictions.py").run()
    assert not at.exception and chart(at, "pred.estimate")  # head effects through its anatomy
    at.selectbox(key="pred.model").set_value("local:tiny/bloom").run()
    assert not at.exception and any("the model's own" in c.value for c in at.caption)
    at.switch_page("pages/inside_head.py").run()  # the model chosen on Predictions
    assert at.selectbox(key="inside.model").value == "local:tiny/bloom"
    assert not at.exception and any("q, k and v were not captured" in w.value for w in at.warning)


@pytest.mark.numeric
def test_what_heads_do_tells_the_story_from_direct_shares_to_composition(smollm2):
    """Opened from the menu on SmolLM2's Mary/John prompt: the direct shares add up to the model's m, the lens
    ends on " Mary", patching the swapped-names prompt restores the prediction at the end, and the strongest
    induction head reads a previous-token head by its keys."""
    from attention.models.analyses.readout import direct_logit_attribution
    from attention.models.analyses.target_foil import contrast

    at = open_page("pages/what_heads_do.py")
    text = at.text_area(key="circ.text").value
    att = attend(smollm2, text)
    shares = direct_logit_attribution(smollm2, att, contrast(att, smollm2.tokenizer, " Mary", " John"))
    # the page ran its pass on one torch thread, this test on every core: float32 sums in other orders (an
    # Intel Xeon read them 3.2e-6 apart), each a sum over the model's width
    width = smollm2.network.config.hidden_size
    assert_float32_close(array(chart(at, "circ.direct")["data"][0]["z"]), shares.heads, terms=width)
    lens = chart(at, "circ.lens")["data"][0]
    # the last layer, last position: the model's own prediction, its space shown; whole on hover, in the cell cut
    # to what fits it at 800 px
    assert lens["customdata"][-1][-1][1] == "␣Mary" and "␣Mary".startswith(lens["text"][-1][-1].rstrip("…"))
    at.button(key="circ.patch").click().run()
    restored = array(chart(at, "circ.patched")["data"][0]["z"])
    assert restored[-1, -1] == pytest.approx(1.0, abs=1e-3) and not at.exception
    at.button(key="circ.induction").click().run()
    composed = table_with(at, "composition")
    keys = composed[composed["composition"] == "K"]
    assert keys.iloc[0]["its role"] == "previous-token"  # SmolLM2's 19.7 reads 17.1
    at.button(key="circ.scan").click().run()
    assert chart(at, "circ.total") and not at.exception


@pytest.mark.numeric
def test_head_atlas_roles_equal_the_probe_and_open_a_heads_pattern(smollm2):
    from attention.models.analyses.roles import head_roles

    at = open_page("pages/head_atlas.py")
    at.selectbox(key="atlas.model").set_value("smollm2").run()
    roles = head_roles(smollm2)
    width = smollm2.network.config.hidden_size  # the page's probe pass and this test's, on their thread counts
    assert_float32_close(canvas(at, "atlas.roles").values, roles.induction, terms=width, magnitude=1.0)
    at.number_input(key="atlas.layer").set_value(19).run()
    at.number_input(key="atlas.head").set_value(7).run()
    assert "induction" in " ".join(m.value for m in at.markdown)
    pattern = canvas(at, "atlas.probe_pattern")
    assert pattern.meta == {"layer": 18, "head": 6, "token": None}
    assert_float32_close(np.nan_to_num(pattern.values), roles.probe.head_weights(18, 6), terms=width, magnitude=1.0)
    from attention.models import ROLE_THRESHOLD, ROLES

    at.number_input(key="atlas.head").set_value(8).run()  # L19H8: labelled by its strongest role only
    above = [ROLES[f][0] for f in ROLES if getattr(roles, f)[18, 7] > ROLE_THRESHOLD]
    said = next(m.value for m in at.markdown if m.value.startswith("Layer 19, head 8:"))
    assert len(above) >= 2 and all(role in said for role in above), (above, said)  # every role it passes


def test_a_saved_result_opens_on_the_model_pages_without_its_model(smollm2):
    """What a notebook exports (export_npz) opens through the upload box: the grid and the zoom are the saved
    weights; a part that needs the model says so; a file that is not a result gets a message."""
    from attention.models.recorded.imported import export_npz

    att = attend(smollm2, "The otter dove into the cold river and came up with a fish.")
    at = open_page("pages/model_heads.py")
    at.file_uploader(key="heads.npz.none").set_value(("otter.npz", export_npz(att), "application/octet-stream")).run()
    assert not at.exception and any("Opened from otter.npz" in c.value.replace("\\", "") for c in at.caption)
    zoom = canvas(at, "heads.zoom").values
    np.testing.assert_allclose(np.nan_to_num(zoom), att.head_weights(0, 0), atol=1e-6)  # layer 1, head 1
    at.switch_page("pages/head_atlas.py").run()
    assert not at.exception and any("running the model on a probe" in i.value for i in at.info)
    at.switch_page("pages/model_heads.py").run()
    at.button(key="heads.npz_close").click().run()
    at.file_uploader(key="heads.npz.none").set_value(("evil.npz", b"PK\x03\x04 not really", "application/zip")).run()
    assert not at.exception and any("evil.npz cannot be opened" in e.value.replace("\\", "") for e in at.error)


def test_a_precision_picked_runs_the_model_in_it_and_keeps_its_results_apart():
    """The Precision picker loads the model in bfloat16: the weights on Inside one head are held to the model's
    own eager attention in bfloat16 (within the guard's allowance for its rounding), not to float32's, and the
    page says which precision ran."""
    at = open_page("pages/inside_head.py")
    at.session_state["inside.why"] = True  # "Why this key" open: it says the model's precision too
    at.run()
    float32 = table_with(at, "softmax weight")
    assert "precision auto: float32" in " ".join(c.value for c in at.caption)
    at.selectbox(key="inside.precision").set_value("bfloat16").run()
    assert not at.exception, at.exception
    half = table_with(at, "softmax weight")
    captions = " ".join(c.value for c in at.caption)
    assert "MiniLM\\-L6 in bfloat16" in captions and "runs in bfloat16" in captions
    assert "Equals the model's own bfloat16 attention to within" in captions  # the guard's line, what it allows
    assert "fed the same inputs:" in captions  # this head's gap, and what bfloat16's rounding allows
    assert "bfloat16's rounding usually allows up to 0.063)." in captions and "e-0" not in captions  # plain
    np.testing.assert_allclose(half["softmax weight"], half["model's own weight"], atol=6e-2)
    assert not np.allclose(half["model's own weight"], float32["model's own weight"], atol=1e-6)  # bf16's own
    np.testing.assert_allclose(half["softmax weight"].sum(), 1.0, atol=1e-5)
    at.selectbox(key="inside.precision").set_value("auto").run()
    np.testing.assert_array_equal(table_with(at, "softmax weight")["softmax weight"], float32["softmax weight"])


def test_shared_work_is_known_by_its_own_arguments(minilm):
    """The pages' shared caches key work by its arguments (pages/_jobs.cache_key), not by a hand-copied tuple:
    two results of one text are two (made in two precisions they differ), every argument counts, and an
    argument it cannot know is refused rather than keyed by something that could collide."""
    from pages._jobs import cache_key, shared

    first, again = attend(minilm, "I sat on the river bank."), attend(minilm, "I sat on the river bank.")
    assert cache_key(first) == cache_key(first) != cache_key(again)
    assert cache_key(minilm) == ("model", "minilm", minilm.check.dtype)
    pixels = np.zeros((8, 8), np.float32)
    assert cache_key(pixels) == cache_key(pixels.copy()) != cache_key(pixels + 1)
    assert cache_key((1, "a", None)) == (1, "a", None)
    from attention.models import TokenChoice  # a record (a contrast's target, a lens's): known by its fields

    paris, london = TokenChoice(" Paris", 7, " Paris", 1), TokenChoice(" London", 9, " London", 1)
    assert cache_key(paris) == cache_key(TokenChoice(" Paris", 7, " Paris", 1)) != cache_key(london)
    with pytest.raises(TypeError, match="cache_key"):
        cache_key(object())

    def scan(result, layer, *, ablation="zero"):
        return result.serial, layer, ablation

    job = shared(scan, "…", first, 3)
    assert shared(scan, "…", first, 3, ablation="zero") is not job  # a keyword given is part of the key
    assert shared(scan, "…", first, 3) is job
    assert shared(scan, "…", again, 3) is not job and shared(scan, "…", first, 4) is not job
    assert job.wait(10) and job.result == (first.serial, 3, "zero")


def test_what_heads_do_on_gemma3_says_why_there_are_no_direct_shares_and_goes_on():
    """Gemma 3 normalises what attention writes, so a head's direct share is not defined (capabilities): the
    page says so in section 1 and still reads the logit lens, patching and composition (it stopped there)."""
    from attention.models import load_model, why_not

    at = open_page("pages/what_heads_do.py")
    at.selectbox(key="circ.model").set_value("gemma3").run(timeout=300)
    assert not at.exception
    reason = why_not(load_model("gemma3"), "direct attribution")
    assert reason and any(reason[:40] in i.value.replace("\\", "") for i in at.info)
    assert [h.value[:1] for h in at.header] == ["1", "2", "3", "4"] and chart(at, "circ.lens")
