"""Scaled dot-product attention against torch's own kernel, plus softmax/entropy/masks properties."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention import (
    attention_from_embeddings,
    causal_mask,
    combine_masks,
    entropy,
    padding_mask,
    scaled_dot_product_attention,
    scored_attention,
    softmax,
)

rng = np.random.default_rng(0)


def torch_sdpa(q, k, v, **kw):
    t = [torch.tensor(a, dtype=torch.float64) for a in (q, k, v)]
    if "attn_mask" in kw and kw["attn_mask"] is not None:
        kw["attn_mask"] = torch.tensor(kw["attn_mask"])
    return F.scaled_dot_product_attention(*t, **kw).numpy()


@pytest.mark.parametrize("shape_q,shape_k,d_v", [((3, 4), (3, 4), 4), ((5, 8), (7, 8), 3),
                                                 ((2, 3, 5, 16), (2, 3, 6, 16), 8)])
def test_output_matches_torch_sdpa(shape_q, shape_k, d_v):
    q, k = rng.normal(size=shape_q), rng.normal(size=shape_k)
    v = rng.normal(size=shape_k[:-1] + (d_v,))
    trace = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(trace.output, torch_sdpa(q, k, v), atol=1e-12)
    assert trace.weights.shape == shape_q[:-1] + (shape_k[-2],)
    assert trace.scale == pytest.approx(1 / math.sqrt(shape_q[-1]))


def test_boolean_mask_matches_torch():
    q, k, v = rng.normal(size=(2, 4, 5, 8)), rng.normal(size=(2, 4, 6, 8)), rng.normal(size=(2, 4, 6, 3))
    mask = rng.random((2, 1, 5, 6)) > 0.3
    mask[..., 0] = True  # torch gives NaN for fully masked rows; keep one key per row here
    trace = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(trace.output, torch_sdpa(q, k, v, attn_mask=mask), atol=1e-12)
    assert np.all(trace.weights[~np.broadcast_to(mask, trace.weights.shape)] == 0.0)
    assert np.all(np.isneginf(trace.scaled[~np.broadcast_to(mask, trace.scaled.shape)]))


def test_causal_mask_matches_torch_is_causal():
    q, k, v = rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 7, 4))
    trace = scaled_dot_product_attention(q, k, v, mask=causal_mask(7))
    np.testing.assert_allclose(trace.output, torch_sdpa(q, k, v, is_causal=True), atol=1e-12)
    assert np.all(np.triu(trace.weights[0], 1) == 0.0)


def test_custom_scale_matches_torch():
    q, k, v = rng.normal(size=(4, 8)), rng.normal(size=(5, 8)), rng.normal(size=(5, 2))
    trace = scaled_dot_product_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(trace.output, torch_sdpa(q, k, v, scale=0.3), atol=1e-12)


def test_fully_masked_row_is_zero_and_flagged():
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(4, 4)), rng.normal(size=(4, 2))
    mask = np.ones((3, 4), bool)
    mask[1] = False
    trace = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not np.any(np.isnan(trace.weights)) and not np.any(np.isnan(trace.output))
    assert np.all(trace.weights[1] == 0) and np.all(trace.output[1] == 0)
    assert trace.fully_masked.tolist() == [False, True, False]
    np.testing.assert_allclose(trace.weights[[0, 2]].sum(-1), 1.0)


def test_padding_and_combined_masks():
    real = np.array([1, 1, 1, 0, 0])
    pad = padding_mask(real)
    assert pad.shape == (1, 5) and pad[0].tolist() == [True, True, True, False, False]
    both = combine_masks(causal_mask(5), pad)
    expected = np.tril(np.ones((5, 5), bool)) & (real[None, :] == 1)
    assert np.array_equal(both, expected)
    assert combine_masks(None, None) is None


def test_projections_from_embeddings_match_torch_linear():
    x = rng.normal(size=(5, 6))
    w_q, w_k, w_v = (rng.normal(size=(6, 4)) for _ in range(3))
    b_q, b_k, b_v = (rng.normal(size=4) for _ in range(3))
    trace = attention_from_embeddings(x, w_q, w_k, w_v, b_q=b_q, b_k=b_k, b_v=b_v)
    xt = torch.tensor(x)
    q, k, v = (F.linear(xt, torch.tensor(w.T), torch.tensor(b)) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
    np.testing.assert_allclose(trace.q, q.numpy(), atol=1e-12)
    np.testing.assert_allclose(trace.output, F.scaled_dot_product_attention(q, k, v).numpy(), atol=1e-12)


def test_softmax_temperature_and_stability():
    x = np.array([1000.0, 999.0, -np.inf])
    s = softmax(x)
    np.testing.assert_allclose(s, [1 / (1 + math.e**-1), math.e**-1 / (1 + math.e**-1), 0.0])
    np.testing.assert_allclose(softmax(x[:2], temperature=2.0), torch.softmax(torch.tensor(x[:2]) / 2, 0).numpy())
    assert np.all(softmax(np.full(3, -np.inf)) == 0)
    with pytest.raises(ValueError, match="temperature"):
        softmax(x, temperature=0)


def test_entropy_bounds():
    assert entropy(np.full(8, 1 / 8)) == pytest.approx(math.log(8))
    assert entropy(np.array([0.0, 1.0, 0.0])) == 0.0
    p = rng.dirichlet(np.ones(6))
    assert entropy(p) == pytest.approx(torch.distributions.Categorical(probs=torch.tensor(p)).entropy().item())


@pytest.mark.parametrize("q,k,v,message", [
    (np.ones((2, 3)), np.ones((4, 5)), np.ones((4, 2)), r"\(2, 3\).*\(4, 5\)"),
    (np.ones((2, 3)), np.ones((4, 3)), np.ones((5, 2)), r"\(4, 3\).*\(5, 2\)"),
    (np.ones((2, 0)), np.ones((4, 0)), np.ones((4, 2)), "d_k must be at least 1"),
    (np.array([[np.nan, 1.0]]), np.ones((2, 2)), np.ones((2, 2)), "NaN or infinite"),
    (np.ones((1, 2)), np.array([[np.inf, 1.0]]), np.ones((1, 2)), "NaN or infinite"),
    ([["a", "b"]], np.ones((1, 2)), np.ones((1, 2)), "numeric"),
])
def test_bad_input_is_refused_clearly(q, k, v, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


def test_bad_mask_is_refused():
    q = np.ones((2, 3))
    with pytest.raises(ValueError, match="mask"):
        scaled_dot_product_attention(q, q, q, mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="boolean"):
        scaled_dot_product_attention(q, q, q, mask=np.ones((2, 2)))


finite = st.floats(-20, 20, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 5), st.data())
def test_properties(n, m, d, data):
    q = data.draw(arrays(np.float64, (n, d), elements=finite))
    k = data.draw(arrays(np.float64, (m, d), elements=finite))
    v = data.draw(arrays(np.float64, (m, 2), elements=finite))
    mask = data.draw(arrays(np.bool_, (n, m)))
    trace = scaled_dot_product_attention(q, k, v, mask=mask)
    live = mask.any(-1)
    np.testing.assert_allclose(trace.weights[live].sum(-1), 1.0, atol=1e-9)  # rows sum to 1
    assert np.all(trace.weights[~mask] == 0.0)  # masked weights exactly 0
    assert np.all(trace.weights[~live] == 0.0) and np.array_equal(trace.fully_masked, ~live)
    # Adding a constant to a row of scores changes nothing (softmax is shift-invariant).
    c = data.draw(finite)
    shifted = softmax(np.where(mask, trace.scaled + c, -np.inf))
    np.testing.assert_allclose(shifted, trace.weights, atol=1e-9)


def test_named_steps_score_terms_and_weighted_values_against_torch():
    """score_terms(i) are the products each dot product sums; weighted_values(i) the terms the output sums."""
    q, k, v = (rng.normal(size=s) for s in ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7)))
    t = scaled_dot_product_attention(q, k, v)
    tq, tk, tv = (torch.tensor(a) for a in (q, k, v))
    w = torch.softmax(tq @ tk.transpose(-1, -2) / 2.0, dim=-1)  # sqrt(d_k) = 2
    for i in (0, 4):
        expected_terms = torch.einsum("bhc,bhjc->bhjc", tq[:, :, i], tk).numpy()
        np.testing.assert_allclose(t.score_terms(i), expected_terms, atol=1e-12)
        np.testing.assert_allclose(t.score_terms(i).sum(-1), t.scores[..., i, :], atol=1e-12)
        expected_weighted = torch.einsum("bhj,bhjc->bhjc", w[:, :, i], tv).numpy()
        np.testing.assert_allclose(t.weighted_values(i), expected_weighted, atol=1e-12)
        np.testing.assert_allclose(t.weighted_values(i).sum(-2), t.output[..., i, :], atol=1e-12)
    additive = scored_attention(q[0, 0], k[0, 0], v[0, 0], "additive", w1=np.eye(4), w2=np.eye(4), v_a=np.ones(4))
    with pytest.raises(ValueError, match="not a sum"):
        additive.score_terms(0)


def test_strongest_keys_are_the_largest_weights_and_never_masked_ones():
    rng_local = np.random.default_rng(3)
    x = rng_local.normal(size=(30, 4))
    t = scaled_dot_product_attention(x, x, x, mask=causal_mask(30))
    got = t.strongest_keys(20, 5)
    expected = np.sort(np.argsort(-t.weights[20])[:5])
    assert got.tolist() == expected.tolist()
    assert t.strongest_keys(2, 5).tolist() == [0, 1, 2]  # query 2 sees three keys only
