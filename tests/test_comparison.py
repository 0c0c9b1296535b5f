"""Two results compared head by head (issue 44's API): the distance is the mean Jensen–Shannon divergence of
the heads' rows, checked against the formula written out with Python floats."""

import math

import numpy as np
import pytest

from attention.models import attend, compare_heads, from_attentions, js_divergence
from tests.numerics import assert_float32_close, float32_approx

TOKENS = ["[CLS]", "the", "river", "bank", "[SEP]"]


def _jsd(p, q) -> float:
    """JSD in bits, one pair of rows, term by term."""
    total = 0.0
    for a, b in zip(p, q, strict=True):
        m = (a + b) / 2
        total += (a * math.log2(a / m) if a > 0 else 0.0) + (b * math.log2(b / m) if b > 0 else 0.0)
    return total / 2


def _random_weights(rng, layers=2, heads=3):
    n = len(TOKENS)
    z = rng.normal(size=(layers, 1, heads, n, n)) * 3
    w = np.exp(z)
    return w / w.sum(axis=-1, keepdims=True)


def test_the_distance_is_the_mean_jsd_of_each_heads_rows():
    rng = np.random.default_rng(0)
    wa, wb = _random_weights(rng), _random_weights(rng)
    a, b = from_attentions(TOKENS, list(wa)), from_attentions(TOKENS, list(wb))
    cmp = compare_heads(a, b)
    for layer in range(2):
        for head in range(3):
            expected = np.mean([_jsd(wa[layer, 0, head, i], wb[layer, 0, head, i]) for i in range(len(TOKENS))])
            assert cmp.distance[layer, head] == pytest.approx(expected, abs=1e-6)
    assert np.allclose(compare_heads(a, a).distance, 0.0, atol=1e-6)  # a result against itself
    layer, head, value = cmp.largest(1)[0]
    assert value == cmp.distance.max() and cmp.distance[layer, head] == value
    assert len(cmp.largest(100)) == 6 and [v for *_, v in cmp.largest(6)] == sorted(cmp.distance.ravel())[::-1]


def test_the_jsd_is_0_for_the_same_row_and_1_for_rows_with_no_key_in_common():
    assert js_divergence([0.5, 0.5, 0.0], [0.5, 0.5, 0.0]) == 0
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)


def test_results_that_cannot_be_compared_are_refused_with_the_reason():
    rng = np.random.default_rng(1)
    a = from_attentions(TOKENS, list(_random_weights(rng)))
    with pytest.raises(ValueError, match="different tokens"):
        compare_heads(a, from_attentions(["[CLS]", "a", "b", "c", "[SEP]"], list(_random_weights(rng))))
    with pytest.raises(ValueError, match="words=True"):
        compare_heads(a, from_attentions(TOKENS, list(_random_weights(rng, heads=2))))


def test_two_models_are_compared_on_words_each_head_matched_to_its_nearest(minilm, smollm2):
    text = "I sat on the river bank."
    a, b = attend(minilm, text), attend(smollm2, text)
    with pytest.raises(ValueError, match="words=True"):
        compare_heads(a, b)
    cmp = compare_heads(a, b, words=True)
    assert cmp.match.shape == (6, 12, 2) and cmp.distance.shape == (6, 12)
    assert [w.lower() for w in cmp.labels] == ["i", "sat", "on", "the", "river", "bank", "."]
    # head L1H1 of MiniLM against every head of SmolLM2, by hand on the words' weights
    from attention.models import word_level

    def words_only(att):
        w = word_level(att)
        keep = ~np.asarray(w.special, bool)
        x = w.weights[:, :, keep][:, :, :, keep].astype(np.float64)
        return x / x.sum(axis=-1, keepdims=True)

    wa, wb = words_only(a), words_only(b)
    by_hand = np.array([[np.mean([_jsd(wa[0, 0, i], wb[lb, hb, i]) for i in range(len(cmp.labels))])
                         for hb in range(wb.shape[1])] for lb in range(wb.shape[0])])
    assert cmp.match_distance[0, 0] == pytest.approx(by_hand.min(), abs=1e-6)
    assert tuple(cmp.match[0, 0]) == np.unravel_index(by_hand.argmin(), by_hand.shape)
    assert np.array_equal(cmp.distance, cmp.match_distance)  # other shapes: each head's distance is its match's


# --- tiny random models, two results of real forward passes -----------------------------------------------
TEXT = "I sat on the river bank and watched the water."


@pytest.fixture(scope="module")
def tiny_llama(tok):
    """A tiny llama with seeded random weights reading BERT tokens, and the plain transformers model."""
    from tests.tiny_models import build

    return build("llama", tok)


def _with_query_zeroed(reference, tok, layer: int, head: int):
    """A copy of `reference` whose head (layer, head) has its query weights zeroed: its scores are all 0."""
    import copy

    import torch

    from attention.models import from_model

    model = copy.deepcopy(reference)
    attn = model.model.layers[layer].self_attn
    d = attn.head_dim
    with torch.no_grad():
        attn.q_proj.weight[head * d:(head + 1) * d] = 0.0
    return from_model(model, tok, name="llama, one query zeroed")


@pytest.mark.numeric
def test_a_model_against_itself_is_0_and_a_zeroed_query_tops_largest(tiny_llama, tok):
    from attention.models import attend, compare_results

    ours, reference = tiny_llama
    a = attend(ours, TEXT)
    assert np.allclose(compare_results(a, attend(ours, TEXT)).distance, 0.0, atol=1e-7)
    layer, head = 1, 2  # the last layer: no later layer reads what the change does to its output
    b = attend(_with_query_zeroed(reference, tok, layer, head), TEXT)
    cmp = compare_results(a, b)
    assert not cmp.words
    assert cmp.largest(1)[0][:2] == (layer, head)
    others = np.delete(cmp.distance.ravel(), layer * a.n_heads + head)
    assert np.abs(others).max() < 1e-9 < 1e-6 < cmp.distance[layer, head]  # nothing else moved (random weights
    # near 0 make every head of a tiny model nearly uniform: the zeroed one moved by ~1e-5 bits)
    # its rows became uniform over the keys each sees (causal): the distance by hand from the model's own rows
    causal = [np.full(i + 1, 1.0 / (i + 1)) for i in range(len(a.tokens))]
    own = a.head_weights(layer, head)
    expected = np.mean([_jsd(own[i, : i + 1], causal[i]) for i in range(len(a.tokens))])
    assert cmp.distance[layer, head] == float32_approx(expected, terms=len(a.tokens), magnitude=1.0)


def test_two_tokenizers_are_compared_on_words(tiny_llama, tok):
    """A tiny llama reading BERT pieces against one reading SmolLM2's byte-level pieces: same words."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from attention.models import attend, compare_results, from_model, head_pair
    from attention.models.forward.bundled import smollm2_dir

    smol_tok = AutoTokenizer.from_pretrained(smollm2_dir(lambda m: None))
    torch.manual_seed(1)
    config = LlamaConfig(num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1, hidden_size=32,
                         intermediate_size=64, vocab_size=len(smol_tok))
    config._attn_implementation = "eager"
    other = from_model(LlamaForCausalLM(config).eval(), smol_tok, name="tiny llama, SmolLM2's tokenizer")
    text = "Unbelievably, the otters slid along the riverbank."
    a, b = attend(tiny_llama[0], text), attend(other, text)
    assert a.tokens != b.tokens
    cmp = compare_results(a, b)
    assert cmp.words and [w.lower() for w in cmp.labels] == ["unbelievably", ",", "the", "otters", "slid", "along",
                                                             "the", "riverbank", "."]
    assert cmp.match.shape == (2, 4, 2) and (cmp.match[..., 0] < 3).all() and (cmp.match[..., 1] < 2).all()
    for layer in range(2):
        for head in range(4):  # the pair shown on the page is the matched one, at the distance in the map
            pair = head_pair(a, b, cmp, layer, head)
            assert (pair.b_layer, pair.b_head) == tuple(cmp.match[layer, head])
            # float32 weights, summed in another order: float32's rounding (1.2e-9 apart on an AMD EPYC)
            assert pair.distance == pytest.approx(cmp.distance[layer, head], rel=1e-6, abs=1e-9)


def test_a_head_pair_shows_both_heads_and_b_minus_a(tiny_llama, tok):
    from attention.models import attend, compare_results, head_pair

    ours, reference = tiny_llama
    a, b = attend(ours, TEXT), attend(_with_query_zeroed(reference, tok, 1, 2), TEXT)
    pair = head_pair(a, b, compare_results(a, b), 1, 2)
    wa, wb = a.head_weights(1, 2), b.head_weights(1, 2)
    assert np.allclose(pair.a.matrix, wa) and np.allclose(pair.b.matrix, wb)
    assert np.allclose(pair.difference.matrix, wb - wa, atol=1e-7)
    assert pair.row_distance[0] == 0.0  # the first token sees itself alone, in both
    assert pair.row_distance.mean() == pytest.approx(compare_results(a, b).distance[1, 2])


def test_a_saved_comparison_reopens_without_either_model(tiny_llama, tok):
    from attention.models import attend, compare_results, comparison_npz, export_npz, load_comparison

    ours, reference = tiny_llama
    a, b = attend(ours, TEXT), attend(_with_query_zeroed(reference, tok, 1, 2), TEXT)
    cmp = compare_results(a, b)
    saved = load_comparison(comparison_npz(a, b, cmp, label_a="base", label_b="zeroed"))
    assert (saved.label_a, saved.label_b) == ("base", "zeroed")
    assert saved.a.tokens == a.tokens and saved.b.tokens == b.tokens
    assert np.array_equal(saved.comparison.distance, cmp.distance)
    again = compare_results(saved.a, saved.b)  # the saved weights give the saved distances
    assert np.allclose(again.distance, cmp.distance, atol=1e-6)
    with pytest.raises(ValueError, match="not a comparison"):
        load_comparison(b"not a zip at all")
    with pytest.raises(ValueError, match="has no format, a_npz"):
        load_comparison(export_npz(a))  # a single result is not a comparison


def test_words_are_read_from_the_offsets_where_the_tokenizer_calls_the_text_one_word():
    """Gemma 3's tokenizer, read from its GGUF file, has no pre-tokenizer: its word ids say one word."""
    from attention.models.forward.tokens import words_from_offsets

    text = "I sat on the river-bank."
    pieces = ["<bos>", "I", " sat", " on", " the", " river", "-", "bank", "."]
    offsets, at = [(0, 0)], 0
    for piece in pieces[1:]:
        offsets.append((at, at + len(piece)))
        at += len(piece)
    special = np.array([True] + [False] * 8)
    ids = words_from_offsets(np.array(offsets), special, text)
    assert ids.tolist() == [-1, 0, 1, 2, 3, 4, 5, 6, 7]  # "river", "-", "bank", "." are words, as GPT-2 splits them
    ids = words_from_offsets(np.array(offsets[:3] + [(5, 8)]), special[:4], "I satisfy")  # "I", " sat", "isfy"
    assert ids.tolist() == [-1, 0, 1, 1]


# --- the page ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # (its float32 comparisons use tests/numerics.py; What heads do's page test reruns as numeric)
def test_the_compare_page_shows_the_comparison_and_opens_a_head_and_a_saved_file(smollm2, smollm2_bf16):
    import json

    from attention.models import attend, compare_results, comparison_npz, load_comparison
    from tests.test_pages import array, chart, open_page

    at = open_page("pages/compare.py")  # its own pair: SmolLM2 against itself in bfloat16
    focus = at.session_state["visit.focus"]
    assert focus.other.dtype == "bfloat16" and not at.error
    text = "I sat on the river bank and watched the water."
    a, b = attend(smollm2, text), attend(smollm2_bf16, text)
    cmp = compare_results(a, b)
    shown = array(chart(at, "cmp.map")["data"][0]["z"])
    # the page's own passes: each distance sums p log(p / m) over a row's keys, each term rounded by ~eps x p
    assert_float32_close(shown, cmp.distance, terms=len(a.tokens), magnitude=1.0)
    ranked = cmp.largest(10)
    assert [row for row in at.dataframe[0].value["head of A"]] == [f"L{l_ + 1}H{h + 1}" for l_, h, _ in ranked]
    top = ranked[0][:2]  # a ranked result opens its top head, until the visitor picks one
    assert (at.session_state["visit.focus"].layer, at.session_state["visit.focus"].head) == top
    assert (at.number_input(key="cmp.layer").value, at.number_input(key="cmp.head").value) == (top[0] + 1, top[1] + 1)
    at.session_state[f"cmp.ranked.{top[0]}.{top[1]}"] = {"selection": {"rows": [2], "columns": [], "cells": []}}
    at.run()
    assert (at.session_state["visit.focus"].layer, at.session_state["visit.focus"].head) == ranked[2][:2]
    layout = json.loads(next(e.proto.spec for e in at.get("plotly_chart") if "cmp.pair" in e.proto.id))["layout"]
    assert (layout["meta"]["layer"], layout["meta"]["head"]) == ranked[2][:2]
    # head roles in both, the open head's beside its counterpart's (the Head atlas's head_roles of each model)
    from attention.models import head_roles

    at.button_group(key="cmp.measure").set_value("roles").run()
    assert not at.exception and not at.warning
    layer, head = ranked[2][:2]
    a_roles, b_roles = head_roles(smollm2), head_roles(smollm2_bf16)
    rows = next(d for d in at.dataframe if "model" in d.value.columns).value
    width = smollm2.network.config.hidden_size  # each probe pass's sums, on the page's thread count and ours
    assert rows["induction score"].tolist() == float32_approx(
        [a_roles.induction[layer, head], b_roles.induction[layer, head],
         b_roles.induction[layer, head] - a_roles.induction[layer, head]], terms=width, magnitude=1.0)
    # the direct share of logit(target) - logit(foil), by default A's two likeliest next tokens: the page's
    # numbers are each model's own direct_logit_attribution (held to the model's logits in test_effects)
    from attention.models import contrast, direct_logit_attribution, next_tokens

    at.button_group(key="cmp.measure").set_value("direct").run()
    assert not at.exception and not at.warning
    target, foil = next_tokens(a.next_logits, smollm2.tokenizer, k=2).tokens
    bf16 = smollm2_bf16
    shares = [direct_logit_attribution(m, r, contrast(r, m.tokenizer, target, foil)).heads[layer, head]
              for m, r in ((smollm2, a), (bf16, b))]
    rows = next(d for d in at.dataframe if "model" in d.value.columns).value
    assert rows["direct share"].tolist() == float32_approx([shares[0], shares[1], shares[1] - shares[0]], terms=width)
    # a saved comparison: shown as saved, no model run
    at.session_state["cmp.opened"] = load_comparison(comparison_npz(a, b, cmp, label_a="float32", label_b="bf16"))
    at.run()
    assert not at.exception and any("Opened from a file" in c.value for c in at.caption)
    assert not any("Exact:" in c.value or "Equals the model's own" in c.value  # no model's check: neither ran
                   for c in at.caption)
    assert np.allclose(array(chart(at, "cmp.map")["data"][0]["z"]), cmp.distance)


def test_head_change_puts_each_head_beside_its_counterpart():
    from attention.models import head_change

    rng = np.random.default_rng(3)
    a, b = rng.random((2, 3)), rng.random((2, 3))
    same = head_change(a, b)
    assert np.array_equal(same.change, b - a)
    layer, head, value = same.largest(1)[0]
    assert abs(value) == np.abs(b - a).max() and value == same.change[layer, head]
    other = rng.random((4, 2))
    with pytest.raises(ValueError, match="counterpart"):
        head_change(a, other)
    match = rng.integers(0, 2, size=(2, 3, 2))
    matched = head_change(a, other, match)
    for i in range(2):
        for j in range(3):
            assert matched.b[i, j] == other[match[i, j, 0], match[i, j, 1]]
