"""Multi-head attention against torch.nn.MultiheadAttention with copied weights."""

import numpy as np
import pytest
import torch

from attention import causal_mask, multi_head_attention

rng = np.random.default_rng(2)


def torch_mha(x_q, x_kv, d_model, n_heads, mask=None):
    mha = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.tensor(rng.normal(size=tuple(p.shape))))
    W = mha.in_proj_weight.detach().numpy()
    B = mha.in_proj_bias.detach().numpy()
    params = dict(
        w_q=W[:d_model].T, w_k=W[d_model:2 * d_model].T, w_v=W[2 * d_model:].T,
        w_o=mha.out_proj.weight.detach().numpy().T,
        b_q=B[:d_model], b_k=B[d_model:2 * d_model], b_v=B[2 * d_model:], b_o=mha.out_proj.bias.detach().numpy(),
    )
    attn_mask = None if mask is None else torch.tensor(~mask)  # torch: True = NOT allowed
    out, w = mha(torch.tensor(x_q), torch.tensor(x_kv), torch.tensor(x_kv), attn_mask=attn_mask,
                 average_attn_weights=False)
    return params, out.detach().numpy(), w.detach().numpy()


@pytest.mark.parametrize("n,m,batch", [(5, 5, 2), (3, 7, 1)])
def test_matches_nn_multihead_attention(n, m, batch):
    d_model, h = 8, 4
    x_q = rng.normal(size=(batch, n, d_model))
    x_kv = x_q if n == m else rng.normal(size=(batch, m, d_model))  # self when equal, else cross
    params, out, weights = torch_mha(x_q, x_kv, d_model, h)
    trace = multi_head_attention(x_q, x_kv, n_heads=h, **params)
    np.testing.assert_allclose(trace.output, out, atol=1e-10)
    np.testing.assert_allclose(trace.weights, weights, atol=1e-10)
    assert trace.n_heads == h and trace.heads[0].weights.shape == (batch, n, m)
    assert trace.concat.shape == (batch, n, d_model)


def test_causal_self_attention_matches_torch():
    d_model, h, n = 6, 3, 5
    x = rng.normal(size=(1, n, d_model))
    params, out, weights = torch_mha(x, x, d_model, h, mask=causal_mask(n))
    trace = multi_head_attention(x, None, n_heads=h, mask=causal_mask(n), **params)
    np.testing.assert_allclose(trace.output, out, atol=1e-10)
    assert np.all(np.triu(trace.weights[0, 2], 1) == 0)


def test_heads_must_divide_d_model():
    x = rng.normal(size=(3, 6))
    w = np.eye(6)
    with pytest.raises(ValueError, match="do not split into 4 heads"):
        multi_head_attention(x, x, w, w, w, w, 4)
