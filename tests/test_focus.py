"""The typed focus (attention.focus): one value for what a visit looks at, checked against a model's result,
written into a URL and read back."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attention.focus import (
    DTYPES,
    LINK_TEXT_CHARS,
    Focus,
    ModelChoice,
    TokenAt,
    WordPair,
    from_visible_spaces,
    with_visible_spaces,
)

TOKENS = ("[CLS]", "i", "sat", "on", "the", "river", "bank", "[SEP]")


def test_a_model_choice_is_a_value_and_refuses_what_is_not_one():
    assert ModelChoice("smollm2", "bfloat16") == ModelChoice("smollm2", "bfloat16")
    assert len({ModelChoice("smollm2"), ModelChoice("smollm2", "auto"), ModelChoice("smollm2", "float32")}) == 2
    with pytest.raises(ValueError, match="precision"):
        ModelChoice("smollm2", "float8")
    with pytest.raises(ValueError, match="name"):
        ModelChoice("  ")


def test_layer_and_head_are_whole_numbers_from_0_and_the_mean_of_heads_is_a_value_of_its_own():
    assert Focus(layer=np.int64(3), head=np.int32(2)) == Focus(layer=3, head=2)  # from an array: plain ints
    assert type(Focus(layer=np.int64(3)).layer) is int
    for bad in ("mean of heads", 1.5, -1, True, None):
        with pytest.raises(ValueError):
            Focus(head=bad)
    mean = Focus(head=4, aggregation="mean")
    assert mean.head == 4 and mean.aggregation == "mean"  # the head stays a head: a page showing one keeps it


def test_fitting_clamps_a_layer_and_head_and_finds_the_token_followed_or_drops_it():
    focus = Focus(layer=24, head=8, query=TokenAt(6, "bank"))
    fitted, notes = focus.fitted(n_layers=6, n_heads=12, tokens=TOKENS)
    assert (fitted.layer, fitted.head, fitted.query) == (5, 8, TokenAt(6, "bank")) and len(notes) == 1
    assert "Layer 25" in notes[0] and "layer 6" in notes[0]
    fitted, notes = focus.fitted(n_layers=30, n_heads=3, tokens=("The", " cat", " sat"))
    assert (fitted.layer, fitted.head, fitted.query) == (24, 2, None) and len(notes) == 2
    assert "“bank” is not among" in notes[-1]
    moved = ("[CLS]", "the", "bank", "by", "the", "sofa", "in", "the", "bank", "[SEP]")  # two banks: the nearer
    fitted, notes = focus.fitted(n_layers=6, n_heads=12, tokens=moved)
    assert fitted.query == TokenAt(8, "bank") and "is token 8 in this text (it was token 6)" in notes[-1]
    cased = ("I", "sat", "on", "the", "river", "Bank")  # another tokenizer keeps the capital
    assert focus.fitted(n_layers=6, n_heads=12, tokens=cased)[0].query == TokenAt(5, "Bank")
    link = Focus(query=TokenAt(2, ""))  # a link names the position only: the token is filled in
    assert link.fitted(n_layers=6, n_heads=12, tokens=TOKENS) == (Focus(query=TokenAt(2, "sat")), ())
    fitted, notes = Focus(query=TokenAt(40, "")).fitted(n_layers=6, n_heads=12, tokens=TOKENS)
    assert fitted.query is None and "there is no token 40" in notes[0] and "“”" not in notes[0]
    fine = Focus(layer=2, head=3, query=TokenAt(6, "bank"))
    assert fine.fitted(n_layers=6, n_heads=12, tokens=TOKENS) == (fine, ())


def test_another_text_or_model_keeps_the_token_followed_for_fitting_to_find():
    focus = Focus(text="I sat on the river bank", query=TokenAt(6, "bank"), saved="abc")
    assert focus.with_text("Another sentence").query == TokenAt(6, "bank")
    assert focus.with_text(focus.text) is focus
    moved = focus.with_model(ModelChoice("smollm2"))
    assert moved.query == TokenAt(6, "bank") and moved.saved is None and moved.model == ModelChoice("smollm2")
    assert focus.with_query(6, TOKENS).query == TokenAt(6, "bank")


_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
_focuses = st.builds(
    Focus,
    model=st.none() | st.builds(ModelChoice, st.sampled_from(["minilm", "smollm2", "local:tiny/gpt_neox", "gpt2"]),
                                st.sampled_from(DTYPES)),
    text=st.none() | _texts,
    layer=st.integers(0, 40), head=st.integers(0, 40), aggregation=st.sampled_from(["head", "mean", "rollout"]),
    query=st.none() | st.builds(TokenAt, st.integers(0, 600), st.just("")),
    words=st.booleans(), without_sinks=st.booleans(), log=st.booleans(),
    target=st.none() | _texts, foil=st.none() | _texts, corrupt=st.none() | _texts, head_picked=st.booleans(),
    pair=st.none() | st.builds(WordPair, _texts, _texts, _texts), image_format=st.sampled_from(["png", "svg"])
).map(lambda f: dataclasses.replace(  # what a link can hold: a head not picked is the page's own, and picks are
    f, layer=f.layer if f.head_picked else 0, head=f.head if f.head_picked else 0,  # for the link's text
    picked_for=f.text if (f.target, f.foil, f.corrupt) != (None, None, None) else None))


@settings(max_examples=200, deadline=None)
@given(_focuses)
def test_a_focus_written_into_a_url_reads_back_the_same(focus):
    params = focus.to_params()
    assert all(isinstance(v, str) for v in params.values())
    back, notes = Focus.from_params(params)
    assert back == focus and not notes


def test_a_link_names_a_whole_focus_but_keeps_what_no_link_can_hold():
    long = "word " * (LINK_TEXT_CHARS // 4)
    session = Focus(text=long, saved="abc123", image_format="svg", layer=3, words=True)
    params = session.to_params()
    assert "text" not in params
    back, _ = Focus.from_params({"layer": "2"}, session)
    assert back == Focus(text=long, saved="abc123", image_format="svg", layer=1, head_picked=True)  # words: the
    # link's default
    back, _ = Focus.from_params({"model": "smollm2", "text": "short"}, session)
    assert back.saved is None and back.text == "short"  # a model named: the file is closed


def test_a_link_that_cannot_be_read_says_so_and_keeps_the_rest():
    back, notes = Focus.from_params({"layer": "three", "head": "0", "precision": "float8", "model": "minilm",
                                     "query": "-2", "images": "gif", "text": "ok"})
    assert back == Focus(model=ModelChoice("minilm"), text="ok") and len(notes) == 5
    assert any("layer “three”" in n for n in notes) and any("float8" in n for n in notes)


def test_a_space_in_a_token_is_shown_and_read_back():
    assert with_visible_spaces(" Mary") == "␣Mary" and from_visible_spaces("␣Mary") == " Mary"
    assert from_visible_spaces(" Mary") == " Mary"  # a space typed as a space is one too


def test_a_head_not_picked_follows_a_ranked_result_and_a_pick_stays():
    """Issue 59: after the exact scan the head view stayed on L1H1. A view that follows a ranked result shows its
    top head until the visitor picks one; a clamp to fit a model is not a pick."""
    fresh = Focus()
    assert (fresh.following(23, 3).layer, fresh.following(23, 3).head) == (23, 3)
    followed = fresh.following(23, 3)
    assert not followed.head_picked and followed.to_params()["layer"] == "24"  # a link shows the head on screen
    assert Focus.from_params(followed.to_params())[0].head_picked  # and, opened, names it
    picked = fresh.replace(layer=2, head=5)
    assert picked.head_picked and (picked.following(23, 3).layer, picked.following(23, 3).head) == (2, 5)
    assert picked.to_params()["layer"] == "3" and Focus.from_params(picked.to_params())[0].head_picked
    clamped, _ = Focus(layer=40).fitted(n_layers=6, n_heads=12)
    assert clamped.layer == 5 and not clamped.head_picked
    assert not Focus.from_params({"text": "a"})[0].head_picked


def test_a_target_foil_or_corrupted_prompt_holds_for_the_text_it_was_picked_for():
    """Issue 59: " Mary" and " John" were read on a prompt about Anna and Peter. A pick remembers its text: on
    another text it does not hold (and is not written into a link), back on its text it holds again, and a pick
    on a new text drops the picks made for the old one."""
    mary = "When Mary and John went to the store, John gave a drink to"
    anna = "When Anna and Peter went to the park, Peter gave a ball to"
    picked = Focus().with_picks(mary, target=" Mary", foil=" John")
    assert picked.text == mary and picked.picks_hold() and picked.to_params()["target"] == " Mary"
    moved = picked.with_text(anna)
    assert not moved.picks_hold() and "target" not in moved.to_params() and moved.target == " Mary"
    assert moved.with_text(mary).picks_hold()
    again = moved.with_picks(anna, corrupt="When Peter and Anna went to the park, Anna gave a ball to")
    assert again.picks_hold() and again.target is None and again.foil is None and again.corrupt.startswith("When Peter")
    assert again.with_picks(anna, target=" Anna").corrupt == again.corrupt  # picks for one text add up
    back, _ = Focus.from_params(again.to_params())
    assert back.picks_hold() and back.corrupt == again.corrupt
