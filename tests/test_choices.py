"""Choices the model pages follow (issue 59): what a prediction is read with comes from the text on screen unless
the visitor picked it for that text; a ranked result opens its top head until the visitor picks one; a question
is asked where its model is, and says the terms its answer rests on; an estimate of the wrong sign says so;
layer 0 is described as the model makes it; controls and charts read one value."""

import re

import numpy as np
import pytest

from attention.focus import with_visible_spaces
from attention.glossary import definition
from attention.models import attend
from attention.toy import examples as ex
from tests.test_pages import array, canvas, chart, open_page, table_with

pytestmark = pytest.mark.slow
MARY = ex.PREDICTION_EXAMPLES["Mary and John"][0]
ANNA = "When Anna and Peter went to the park, Peter gave a ball to"


def _own_logits(loaded, text: str) -> np.ndarray:
    """The model's own next-token logits after `text` (its own forward pass, not the app's result). (V,)"""
    import torch

    enc = loaded.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return loaded.network(**enc).logits[0, -1].double().numpy()


def _captions(at) -> str:
    return " ".join(c.value for c in at.caption).replace("\\", "")


def test_a_new_prompt_reads_its_own_target_foil_and_corrupted_prompt_on_both_pages(smollm2):
    """The Anna/Peter prompt on Predictions kept " Mary" and " John" (names it does not hold) and What heads do
    corrupted nothing. Now both pages read the model's likeliest next token against the other name of the
    prompt, the corrupted prompt swaps the two, and a pick made for the example says it does not hold here
    (and holds again on its own text)."""
    at = open_page("pages/predictions.py")
    at.text_input(key="pred.foil").set_value("␣the").run()  # picked for the Mary/John example
    at.text_area(key="pred.text").set_value(ANNA).run()
    z = _own_logits(smollm2, ANNA)
    target = smollm2.tokenizer.decode([int(np.argmax(z))])
    assert target.strip() in ("Anna", "Peter")  # the model names one of the two
    foil = " Peter" if target.strip() == "Anna" else " Anna"  # the other name, by hand
    assert at.text_input(key="pred.target").value == with_visible_spaces(target)
    assert at.text_input(key="pred.foil").value == with_visible_spaces(foil)
    assert "picked for another text" in _captions(at) and "␣the" in _captions(at)
    ids = [smollm2.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (target, foil)]
    assert any(f"= {z[ids[0]] - z[ids[1]]:.2f}" in m.value for m in at.latex)  # m on the prompt's own names
    at.switch_page("pages/what_heads_do.py").run()
    assert not at.exception
    assert (at.text_input(key="circ.target").value, at.text_input(key="circ.foil").value) == \
        (with_visible_spaces(target), with_visible_spaces(foil))
    assert at.text_input(key="circ.corrupt").value == "When Peter and Anna went to the park, Anna gave a ball to"
    at.selectbox(key="circ.example").set_value("Mary and John").run()  # the pick's own text: it holds again
    assert at.text_input(key="circ.foil").value == "␣the" and "picked for another text" not in _captions(at)


def test_the_names_of_a_prompt_and_what_a_notebook_derives_from_it(smollm2):
    from attention.models import Focus, contrast_words, prompt_names

    assert prompt_names(ANNA) == ("Anna", "Peter")  # "When" starts the sentence: not a name
    assert prompt_names("Yesterday Sarah told Tom. Then he said: Sarah") == ("Sarah", "Tom")
    att = attend(smollm2, ANNA)
    words = contrast_words(None, att, smollm2.tokenizer)  # a notebook: nothing picked
    assert (words.target.strip(), words.foil.strip()) in (("Anna", "Peter"), ("Peter", "Anna")) and words.note is None
    assert words.corrupt.replace("Anna", "X").replace("Peter", "Anna").replace("X", "Peter") == ANNA
    stale = Focus().with_picks(MARY, target=" Mary", foil=" John").with_text(ANNA)
    moved = contrast_words(stale, att, smollm2.tokenizer)
    assert (moved.target, moved.foil) == (words.target, words.foil) and "“␣Mary” and foil “␣John”" in moved.note
    capital = ex.PREDICTION_EXAMPLES["capital of France"]
    own = contrast_words(None, attend(smollm2, capital[0]), smollm2.tokenizer)
    assert (own.target, own.foil, own.corrupt) == (capital[1], capital[2], None)  # the example's, nothing to swap


def test_a_line_break_among_the_likeliest_tokens_is_never_an_empty_foil_and_is_shown_as_one(smollm2):
    """After "The cat sat on the mat. The cat sat on the mat." SmolLM2's second choice is a line break: it was
    derived as the foil, shown as an empty box ("Type the foil token: it is empty") and an empty bar label."""
    import numpy as np

    from attention.focus import from_visible_spaces, with_visible_spaces
    from attention.models import contrast, contrast_words

    text = "The cat sat on the mat. The cat sat on the mat."
    att = attend(smollm2, text)
    z = np.asarray(att.next_logits)
    ranked = [smollm2.tokenizer.decode([int(i)]) for i in np.argsort(-z)[:5]]
    blank = [t for t in ranked if not t.strip()]
    assert blank, ranked  # the case met: a space or line break among the likeliest
    words = contrast_words(None, att, smollm2.tokenizer)
    expected = [t for t in ranked if t.strip()][:2]
    assert [words.target, words.foil] == expected
    contrast(att, smollm2.tokenizer, words.target, words.foil)  # both can be read: no "it is empty"
    assert with_visible_spaces(" a\n") == "␣a⏎" and from_visible_spaces("␣a⏎") == " a\n"


def test_the_hint_of_a_spaced_token_is_given_for_words_not_for_punctuation(smollm2):
    """A foil "," was told "after a word the model writes ␣, (with its space)": true of a word, not of a comma."""
    from attention.models import choose_token, spaced_alternative

    tok = smollm2.tokenizer
    mary = spaced_alternative(tok, choose_token(tok, "Mary"))
    assert mary is not None and mary.token == " Mary"
    assert spaced_alternative(tok, choose_token(tok, ",")) is None
    assert spaced_alternative(tok, choose_token(tok, " Mary")) is None  # typed with its space already


def test_an_estimate_of_the_wrong_sign_is_said_beside_it():
    from attention.models import HeadEffects, agreement

    exact = HeadEffects(0.0, np.array([[-3.85, 0.5], [0.1, 0.0]]), "zero", "m", False)
    estimate = HeadEffects(0.0, np.array([[0.33, 0.4], [-0.2, 0.3]]), "zero", "m", True)
    agrees = agreement(estimate, exact)
    assert agrees.opposite.tolist() == [[True, False], [True, False]]  # a zero disagrees with nothing
    assert agrees.opposite_heads() == [(0, 0, -3.85, 0.33), (1, 0, 0.1, -0.2)]  # the largest exact effect first
    assert agrees.pair(0, 0) == "exact −3.850, estimate +0.330 (the wrong sign)"
    assert agrees.pair(0, 1) == "exact +0.500, estimate +0.400"
    # As the pages draw them: how much m falls without each head, positive where the head helped the target.
    assert exact.drop.tolist() == [[3.85, -0.5], [-0.1, -0.0]]
    assert agrees.pair(0, 0, drop=True) == "exact +3.850, estimate −0.330 (the wrong sign)"


def test_an_encoders_token_followed_is_found_in_each_new_sentence():
    """Predictions on an encoder followed a word box that kept the last sentence's word ("bank"), and ended on a
    warning once the new sentence did not have it: the token followed is the visit's, fitted to each text."""
    at = open_page("pages/predictions.py")
    at.selectbox(key="pred.model").set_value("minilm").run()
    at.text_area(key="pred.text").set_value("I paid money into the bank").run()
    at.text_area(key="pred.text").set_value("The cat sat on the mat.").run()
    assert not at.exception and not at.warning, [w.value for w in at.warning]
    followed = next(s for s in at.selectbox if s.label == "Token to follow")
    assert followed.value == 6 and "mat" in str(followed.format_func(followed.value))  # its last word
    assert chart(at, "pred.vector")["layout"]["title"]["text"].endswith("“mat”")


def test_the_exact_scan_opens_the_head_that_matters_most_and_says_where_the_estimate_has_the_wrong_sign():
    at = open_page("pages/predictions.py")
    at.button(key="pred.scan").click().run()
    exact = array(chart(at, "pred.exact")["data"][0]["z"])
    estimate = array(chart(at, "pred.estimate")["data"][0]["z"])
    layer, head = np.unravel_index(np.argmax(np.abs(exact)), exact.shape)
    assert (at.number_input(key="pred.layer").value, at.number_input(key="pred.head").value) == (layer + 1, head + 1)
    table = table_with(at, "m falls by (exact)")
    wrong = np.sign(table["m falls by (exact)"]) * np.sign(table["estimate"]) < 0
    assert list(table["estimate's sign"]) == ["wrong" if w else "right" for w in wrong]
    n_wrong = int((np.sign(exact) * np.sign(estimate) < 0).sum())
    said = _captions(at)
    assert f"wrong sign for {n_wrong} of {exact.size} heads" in said if n_wrong else "right sign for every" in said
    other = (head + 1) % exact.shape[1] + 1  # from 1, as the box counts
    at.number_input(key="pred.head").set_value(other).run()  # a head picked stays
    picked = (at.number_input(key="pred.layer").value, at.number_input(key="pred.head").value)
    assert picked == (layer + 1, other)
    at.radio(key="pred.method").set_value("mean").run()  # a new ranking: the pick stays
    assert (at.number_input(key="pred.layer").value, at.number_input(key="pred.head").value) == picked
    prompt = at.text_area(key="pred.text").value  # the page's own example: the focus held None for it
    at.button(key="pred.open.pages/model_heads.py").click().run()  # Model heads on this model, text and head
    assert not at.exception, at.exception
    assert at.selectbox(key="heads.model").value == "smollm2" and at.text_area(key="heads.text").value == prompt
    assert (at.number_input(key="heads.layer").value, at.number_input(key="heads.head").value) == picked


def test_the_atlas_and_the_composition_section_open_the_strongest_induction_head():
    at = open_page("pages/head_atlas.py")
    at.selectbox(key="atlas.model").set_value("smollm2").run()
    scores = canvas(at, "atlas.roles").values  # induction, the role shown first
    layer, head = np.unravel_index(np.argmax(scores), scores.shape)
    assert (at.number_input(key="atlas.layer").value, at.number_input(key="atlas.head").value) == (layer + 1, head + 1)
    at.switch_page("pages/what_heads_do.py").run()
    assert (at.number_input(key="circ.layer").value, at.number_input(key="circ.head").value) == (layer + 1, head + 1)


def test_a_question_is_asked_where_its_model_is_and_says_the_terms_its_answer_rests_on():
    """Model heads asked MiniLM's question with SmolLM2 on screen (a commit switched the model), and asked what
    "river" looks at (a sink) before anything had said what a sink is."""
    from attention.models.recorded.questions import QUESTIONS

    at = open_page("pages/model_heads.py", questions=True)
    box = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert definition("sink") in box  # said with the question, before the commit
    assert all("sink" in q.terms for q in QUESTIONS if "[CLS]" in q.choices)  # a sink's an answer: said first
    at.selectbox(key="heads.model").set_value("smollm2").run()
    assert [r for r in at.radio if r.key == "lesson.choice.heads.river"]  # asked beside the page, about MiniLM
    assert "In MiniLM" in " ".join(m.value for m in at.markdown if "Question 1 of 1" in m.value)
    at.radio(key="lesson.choice.heads.river").set_value("[CLS]")
    next(b for b in at.button if str(b.key).startswith("FormSubmitter:lesson.form.heads.river-")).click().run()
    assert not at.exception and at.selectbox(key="heads.model").value == "smollm2"  # a commit never switches it


def _direct_shares_by_hand(loaded, text: str, target: str, foil: str) -> dict[str, float]:
    """Each part's direct share of m = logit(target) - logit(foil) at the last position, from the model's own
    modules: the embeddings, every attention's and every MLP's output, read through the final RMSNorm with its
    scale frozen at the clean run's, and the unembedding."""
    import torch

    body = loaded.network.model
    seen = {"attn": [], "mlp": []}
    hooks = [body.embed_tokens.register_forward_hook(lambda m, a, out: seen.__setitem__("emb", out[0, -1]))]
    for block in body.layers:
        hooks.append(block.self_attn.register_forward_hook(lambda m, a, out: seen["attn"].append(out[0][0, -1])))
        hooks.append(block.mlp.register_forward_hook(lambda m, a, out: seen["mlp"].append(out[0, -1])))
    try:
        with torch.no_grad():
            loaded.network(**loaded.tokenizer(text, return_tensors="pt"))
    finally:
        for h in hooks:
            h.remove()
    parts = {"emb": seen["emb"].detach().double(), "attn": torch.stack(seen["attn"]).double().sum(0),
             "mlp": torch.stack(seen["mlp"]).double().sum(0)}
    final = sum(parts.values())
    norm = body.norm
    scale = norm.weight.detach().double() / torch.sqrt(final.pow(2).mean() + norm.variance_epsilon)
    ids = [loaded.tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (target, foil)]
    unembed = loaded.network.lm_head.weight.detach().double()
    direction = unembed[ids[0]] - unembed[ids[1]]
    return {name: float((scale * p) @ direction) for name, p in parts.items()}


def test_what_heads_do_asks_which_parts_write_m_as_the_model_itself_says(smollm2):
    from attention.models.recorded.questions import model_questions_for
    from tests.test_lessons import _commit

    q = model_questions_for("what_heads_do")[0]
    prompt, target, foil = ex.PREDICTION_EXAMPLES["capital of France"]
    shares = _direct_shares_by_hand(smollm2, prompt, target, foil)
    expected = {"emb": "the embeddings", "attn": "the heads", "mlp": "the MLPs"}[max(shares, key=shares.get)]
    at = open_page("pages/what_heads_do.py", questions=True)
    assert prompt not in at.text_area(key="circ.text").value  # not on the page before the commit
    _commit(at, q.key, next(c for c in q.choices if c != expected))
    said = " ".join(m.value for m in at.info).replace("\\", "")
    assert f"; {expected} write the most of m directly." in said, said
    for part, name in (("attn", "the heads"), ("mlp", "the MLPs"), ("emb", "the embeddings")):  # as written: ±0.005
        written = re.search(rf"{name} ([+−]\d+\.\d+)", said)
        assert written and float(written.group(1).replace("−", "-")) == pytest.approx(shares[part], abs=0.006), said


def test_layer_zero_is_described_as_the_model_makes_it(minilm, smollm2):
    """Ambiguous words said "Layer 0 is the word's embedding plus its position" of SmolLM2, which adds none."""
    import torch

    at = open_page("pages/ambiguous_words.py")
    assert "plus its position" in _captions(at)  # MiniLM
    at.selectbox(key="amb.model").set_value("smollm2").run()
    assert "plus its position" not in _captions(at) and "adds no position" in _captions(at)

    from attention.models import embedding_positions

    for loaded, adds in ((minilm, True), (smollm2, False)):
        word = loaded.tokenizer(" the", add_special_tokens=False)["input_ids"][0]
        with torch.no_grad():  # the model's own layer 0: one token at positions 1 and 2
            zero = loaded.network(input_ids=torch.tensor([[word, word, word]]), output_hidden_states=True)
        rows = zero.hidden_states[0][0].double()
        assert bool((rows[1] - rows[2]).abs().max() > 1e-6) is adds
        assert embedding_positions(loaded).added is adds


@pytest.mark.browser
def test_controls_and_charts_read_one_value_after_the_page_stopped_early(app_url, browser):
    """Ambiguous words, layer 3 without sinks: a word neither sentence has stops the page before its controls;
    the next word drew the charts at layer 3 without sinks under controls showing layer 1 with sinks on."""
    from tests.harness import page_url, wait_idle

    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(page_url(app_url, "ambiguous_words", layer="3", no_sinks="true"))
    wait_idle(page, timeout=180_000)
    word = page.get_by_test_id("stTextInputField")
    for typed in ("zebra", "bank"):
        word.fill(typed)
        word.press("Enter")
        wait_idle(page)
    titles = [t.text_content() for t in page.locator("[data-testid='stPlotlyChart'] .gtitle").all()]
    assert any("L3" in t for t in titles), titles
    assert page.locator("[data-testid='stNumberInput'] input").first.input_value() == "3"
    assert page.get_by_role("switch", name="Without sinks").is_checked()
    page.close()
