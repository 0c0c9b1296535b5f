"""Aggregations and head statistics against direct computations and hand-made patterns."""

import numpy as np
import pytest
import torch

from attention.compare import compare_word, find_word
from attention.extract import ModelAttention, Stack
from attention.stats import (
    aggregate,
    drop_tokens,
    head_statistics,
    norm_weights,
    rollout,
    token_distribution_shift,
)

rng = np.random.default_rng(4)


def fake_attention(weights, tokens, special=None, v=None):
    """A ModelAttention around given weights (L, H, n, n), for statistics that only read weights."""
    L, H, n, _ = weights.shape
    d = 4
    v = rng.normal(size=(L, H, n, d)) if v is None else v
    stack = Stack(weights=weights, q=np.zeros((L, H, n, d)), k=np.zeros((L, H, n, d)), v=v, mask=None, scale=0.5,
                  bias=False)
    return ModelAttention(model="fake", kind="encoder", tokens=tuple(tokens), token_ids=np.arange(n),
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
    att = fake_attention(w, list("abcde"), v=v)
    # Reference: build the layer's per-head outputs the way a transformer does, keeping i and j apart.
    alpha, vt, wo = torch.tensor(w[1]), torch.tensor(v[1]), torch.tensor(w_o[1]).reshape(H, d, 6)
    contrib = torch.einsum("hij,hjd,hde->ije", alpha, vt, wo)  # sum over heads of alpha_ij v_j W_O^h
    np.testing.assert_allclose(norm_weights(att, w_o, 1), contrib.norm(dim=-1).numpy(), rtol=1e-5)
    one = torch.einsum("ij,jd,de->ije", alpha[2], vt[2], wo[2]).norm(dim=-1).numpy()
    np.testing.assert_allclose(norm_weights(att, w_o, 1, head=2), one, rtol=1e-10)
    with pytest.raises(ValueError, match="W_O"):
        norm_weights(att, None, 1)


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
