"""Scoring variants: each checked against a plain per-pair loop or torch, and all share the trace shape."""

import math

import numpy as np
import pytest
import torch

from attention import METHODS, scored_attention

rng = np.random.default_rng(1)
n, m, d, d_v, r, d_a = 4, 5, 6, 3, 2, 7
q, k, v = rng.normal(size=(n, d)), rng.normal(size=(m, d)), rng.normal(size=(m, d_v))
W, U, Vr = rng.normal(size=(d, d)), rng.normal(size=(r, d)), rng.normal(size=(r, d))
W1, W2, va = rng.normal(size=(d_a, d)), rng.normal(size=(d_a, d)), rng.normal(size=d_a)
PARAMS = {"multiplicative": dict(w=W), "reduced_rank": dict(u=U, w_v=Vr), "additive": dict(w1=W1, w2=W2, v_a=va)}


def loop_scores(method):
    """Score every (query, key) pair one at a time, straight from the formulas."""
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            if method == "dot":
                out[i, j] = sum(q[i, t] * k[j, t] for t in range(d))
            elif method == "scaled_dot":
                out[i, j] = sum(q[i, t] * k[j, t] for t in range(d)) / math.sqrt(d)
            elif method == "multiplicative":
                out[i, j] = sum(q[i, a] * W[a, b] * k[j, b] for a in range(d) for b in range(d))
            elif method == "reduced_rank":
                out[i, j] = sum((U[s] @ q[i]) * (Vr[s] @ k[j]) for s in range(r))
            else:
                out[i, j] = sum(va[a] * math.tanh(W1[a] @ q[i] + W2[a] @ k[j]) for a in range(d_a))
    return out


@pytest.mark.parametrize("method", METHODS)
def test_scores_match_per_pair_loop(method):
    trace = scored_attention(q, k, v, method, **PARAMS.get(method, {}))
    np.testing.assert_allclose(trace.scaled, loop_scores(method), atol=1e-10)
    expected_w = torch.softmax(torch.tensor(loop_scores(method)), -1).numpy()
    np.testing.assert_allclose(trace.weights, expected_w, atol=1e-12)
    np.testing.assert_allclose(trace.output, expected_w @ v, atol=1e-12)
    assert trace.method == method and trace.weights.shape == (n, m)


def test_additive_matches_bahdanau_style_torch_module():
    """The seed's Bahdanau module: energy = tanh(Linear([h; enc])), score = v(energy)."""
    attn = torch.nn.Linear(2 * d, d_a, bias=False, dtype=torch.float64)
    vlin = torch.nn.Linear(d_a, 1, bias=False, dtype=torch.float64)
    with torch.no_grad():
        w = attn.weight.numpy()
        hidden = torch.tensor(q)[:, None, :].expand(n, m, d)
        enc = torch.tensor(k)[None, :, :].expand(n, m, d)
        energy = torch.tanh(attn(torch.cat((hidden, enc), dim=2)))
        ref = torch.softmax(vlin(energy).squeeze(2), dim=1).numpy()
    trace = scored_attention(q, k, v, "additive", w1=w[:, :d], w2=w[:, d:], v_a=vlin.weight.detach().numpy()[0])
    np.testing.assert_allclose(trace.weights, ref, atol=1e-12)


def test_masks_apply_to_every_method():
    mask = np.tril(np.ones((n, m), bool))
    for method in METHODS:
        trace = scored_attention(q, k, v, method, mask=mask, **PARAMS.get(method, {}))
        assert np.all(trace.weights[~mask] == 0)


def test_unknown_method_and_missing_params():
    with pytest.raises(ValueError, match="unknown scoring method"):
        scored_attention(q, k, v, "cosine")
    with pytest.raises(ValueError, match="needs the parameter W"):
        scored_attention(q, k, v, "multiplicative")
    with pytest.raises(ValueError, match=r"\(4, 6\).*\(3, 6\)"):
        scored_attention(q, k, v, "multiplicative", w=np.ones((3, 6)))
