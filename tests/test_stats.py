"""Aggregations, views and head statistics against direct computations and hand-made patterns."""

import re

import numpy as np
import pytest
import torch

from attention.models.aggregations import (
    AGGREGATIONS,
    aggregate,
    attention_row,
    drop_tokens,
    norm_weights,
    rollout,
    token_focus,
    zoom,
)
from attention.models.ambiguous_words import compare_word, token_distribution_shift
from attention.models.head_stats import head_statistics
from attention.models.model_attention import AttentionStack, ModelAttention
from attention.models.tokens import find_word

rng = np.random.default_rng(4)


def fake_attention(weights, tokens, special=None, v=None, w_o=None):
    """A ModelAttention around given weights (L, H, n, n), for statistics that only read weights."""
    L, H, n, _ = weights.shape
    d = 4
    v = rng.normal(size=(L, H, n, d)) if v is None else v
    stack = AttentionStack(weights=weights, q=np.zeros((L, H, n, d)), k=np.zeros((L, H, n, d)), v=v, mask=None,
                           scale=0.5, bias=False, modules=tuple(f"layer.{i}" for i in range(L)),
                           w_o=None if w_o is None else tuple(w_o))
    return ModelAttention(model_name="fake", kind="encoder", tokens=tuple(tokens), token_ids=np.arange(n),
                          special=np.zeros(n, bool) if special is None else np.asarray(special), self_attn=stack,
                          hidden=rng.normal(size=(L + 1, n, 8)), truncated=False, n_input_tokens=n)


def random_rows(*shape):
    w = rng.random(shape)
    return w / w.sum(-1, keepdims=True)


def test_rollout_is_the_product_of_mixed_layers():
    w = random_rows(3, 2, 5, 5)
    mixed = [0.5 * w[layer].mean(0) + 0.5 * np.eye(5) for layer in range(3)]
    mixed = [m / m.sum(-1, keepdims=True) for m in mixed]
    expected = mixed[2] @ mixed[1] @ mixed[0]
    np.testing.assert_allclose(rollout(w)[2], expected, atol=1e-12)
    np.testing.assert_allclose(rollout(w).sum(-1), 1.0, atol=1e-12)


def test_norm_weights_against_torch():
    L, H, n, d = 2, 3, 5, 4
    w = random_rows(L, H, n, n)
    v = rng.normal(size=(L, H, n, d))
    w_o = rng.normal(size=(L, H * d, 6))
    att = fake_attention(w, list("abcde"), v=v, w_o=w_o)
    # Reference: build the layer's per-head outputs the way a transformer does, keeping i and j apart.
    alpha, vt, wo = torch.tensor(w[1]), torch.tensor(v[1]), torch.tensor(w_o[1]).reshape(H, d, 6)
    contrib = torch.einsum("hij,hjd,hde->ije", alpha, vt, wo)  # sum over heads of alpha_ij v_j W_O^h
    np.testing.assert_allclose(norm_weights(att, 1), contrib.norm(dim=-1).numpy(), rtol=1e-5)
    one = torch.einsum("ij,jd,de->ije", alpha[2], vt[2], wo[2]).norm(dim=-1).numpy()
    np.testing.assert_allclose(norm_weights(att, 1, head=2), one, rtol=1e-10)
    with pytest.raises(ValueError, match="W_O"):
        norm_weights(fake_attention(w, list("abcde"), v=v), 1)


def test_aggregations_and_hiding_special_tokens():
    w = random_rows(2, 3, 4, 4)
    att = fake_attention(w, ["[CLS]", "a", "b", "[SEP]"], special=[True, False, False, True])
    np.testing.assert_allclose(aggregate(att, "mean", layer=1), w[1].mean(0))
    np.testing.assert_allclose(aggregate(att, "max", layer=0), w[0].max(0))
    np.testing.assert_allclose(aggregate(att, "head", layer=1, head=2), w[1, 2])
    sub = drop_tokens(w[0, 0], ~att.special)
    assert sub.shape == (2, 2)
    np.testing.assert_allclose(sub.sum(-1), 1.0)
    np.testing.assert_allclose(sub[0, 1] / sub[0, 0], w[0, 0, 1, 2] / w[0, 0, 1, 1])
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(att, "median", layer=0)


def test_head_types_follow_the_thresholds():
    n = 6
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1  # the first token has no previous one
    nxt = np.eye(n, k=1)
    nxt[-1, -1] = 1
    sink = np.zeros((n, n))
    sink[:, 0] = 1
    broad = np.full((n, n), 1 / n)
    att = fake_attention(np.stack([prev, nxt, sink, broad])[None], ["[CLS]", "a", "b", "c", ",", "d"],
                         special=[True, False, False, False, False, False])
    stats = head_statistics(att)
    assert stats.labels[0].tolist() == ["previous-token", "next-token", "sink", "broad"]
    assert stats.previous[0, 0] == pytest.approx(1.0)
    assert stats.entropy[0, 3] == pytest.approx(np.log(n))
    assert stats.punctuation[0, 3] == pytest.approx(1 / n)


def test_shift_over_token_strings():
    a = np.array([0.5, 0.5, 0.0])
    b = np.array([0.0, 0.5, 0.5, 0.0])
    shift = token_distribution_shift(["x", "y", "z"], a, ["w", "y", "x", "v"], b)
    assert shift == pytest.approx(0.0)  # same weight per string, in a different order
    assert token_distribution_shift(["x"], np.array([1.0]), ["y"], np.array([1.0])) == pytest.approx(1.0)


def test_find_word_and_compare():
    assert find_word(("[CLS]", "the", "bank", "."), "Bank") == 2
    with pytest.raises(ValueError, match="not among the tokens"):
        find_word(("a", "b"), "bank")
    w = random_rows(2, 2, 3, 3)
    a = fake_attention(w, ["x", "bank", "y"])
    cmp = compare_word(a, a, "bank")
    assert np.all(cmp.shift == 0) and np.allclose(cmp.cosine, 1)


def test_model_attention_is_read_only():
    """The app shares one cached result between sessions: a page writing into it would leak to others."""
    att = fake_attention(random_rows(1, 2, 3, 3), list("abc"))
    with pytest.raises(ValueError, match="read-only"):
        att.weights[0, 0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        att.hidden[0] = 0.0


def test_aggregate_other_stacks_only_where_they_exist():
    att = fake_attention(random_rows(1, 2, 3, 3), list("abc"))
    with pytest.raises(ValueError, match="no cross attention"):
        aggregate(att, "mean", layer=0, stack="cross")


def test_the_rollout_formula_on_screen_is_the_one_computed():
    """The page shows AGGREGATIONS["rollout"].formula: its two coefficients must be the ones the table's
    function uses, rebuilt here from the formula's own numbers."""
    formula = AGGREGATIONS["rollout"].formula
    mix, skip = (float(x) for x in re.search(r"left\(([\d.]+)\\,\\bar A.*?\+ ([\d.]+)\\, I", formula).groups())
    assert mix + skip == pytest.approx(1.0)
    w = random_rows(3, 2, 4, 4)
    att = fake_attention(w, list("abcd"))
    mixed = [mix * w[layer].mean(0) + skip * np.eye(4) for layer in range(3)]
    mixed = [m / m.sum(-1, keepdims=True) for m in mixed]
    np.testing.assert_allclose(aggregate(att, "rollout", layer=2), mixed[2] @ mixed[1] @ mixed[0], atol=1e-12)


def test_every_aggregation_row_is_a_distribution_when_it_says_so():
    w = random_rows(2, 3, 4, 4)
    att = fake_attention(w, list("abcd"), w_o=rng.normal(size=(2, 3 * 4, 5)))
    for key, agg in AGGREGATIONS.items():
        m = aggregate(att, key, layer=1, head=1)
        assert m.shape == (4, 4)
        assert np.allclose(m.sum(-1), 1.0) == agg.rows_sum_to_one, key


def test_zoom_hides_special_tokens_and_names_the_head():
    w = random_rows(2, 3, 4, 4)
    att = fake_attention(w, ["[CLS]", "a", "b", "[SEP]"], special=[True, False, False, True])
    view = zoom(att, "head", layer=1, head=2)
    assert view.title == "Layer 2, head 3" and view.row_labels == ("[CLS]", "a", "b", "[SEP]")
    np.testing.assert_array_equal(view.matrix, w[1, 2])
    hidden = zoom(att, "head", layer=1, head=2, hide_special=True)
    assert hidden.row_labels == hidden.col_labels == ("a", "b")
    np.testing.assert_allclose(hidden.matrix, w[1, 2, 1:3, 1:3] / w[1, 2, 1:3, 1:3].sum(-1, keepdims=True))
    assert zoom(att, "mean", layer=0).title == "Layer 1, mean over heads"
    with pytest.raises(ValueError, match="outside 2 layers x 3 heads"):
        zoom(att, "head", layer=2, head=0)


def test_token_focus_and_attention_row():
    w = random_rows(2, 3, 4, 4)
    att = fake_attention(w, list("abcd"))
    focus = token_focus(att, 2)
    assert focus.matrix.shape == (6, 4) and focus.row_labels[:4] == ("L1 H1", "L1 H2", "L1 H3", "L2 H1")
    np.testing.assert_array_equal(focus.matrix[4], w[1, 1, 2])  # L2 H2
    np.testing.assert_array_equal(attention_row(att, 2, layer=1, head=1), w[1, 1, 2])
    np.testing.assert_allclose(attention_row(att, 2, layer=1), w[1, :, 2].mean(0))
