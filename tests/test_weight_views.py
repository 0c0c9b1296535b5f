"""TransformerLens's weight views (attention.models.weights), held to transformers' own modules run on the same
vectors (q_proj, k_proj, o_proj, lm_head), and the factored W_QK, W_OV to torch.linalg on the whole product."""

from __future__ import annotations

import pytest
import torch

from attention.models import FactoredMatrix, weights
from tests.numerics import assert_float32_close
from tests.tiny_models import build


@pytest.fixture(scope="module")
def llama(tok):
    ours, reference = build("llama", tok)
    return ours, reference


def test_each_heads_weights_give_what_the_models_own_projections_give(llama):
    ours, reference = llama
    w = weights(ours)
    config = reference.config
    L, H, D = config.num_hidden_layers, config.num_attention_heads, config.hidden_size
    d, kv = D // H, config.num_key_value_heads
    assert w.W_Q.shape == (L, H, D, d) and w.W_K.shape == (L, H, D, d) and w.W_O.shape == (L, H, d, D)
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for layer, block in enumerate(reference.model.layers):
            attn = block.self_attn
            q = attn.q_proj(x).view(5, H, d)
            k, v = attn.k_proj(x).view(5, kv, d), attn.v_proj(x).view(5, kv, d)
            for h in range(H):
                assert_float32_close(x @ w.W_Q[layer, h], q[:, h], terms=D)
                assert_float32_close(x @ w.W_K[layer, h], k[:, h // (H // kv)], terms=D)  # its KV head
                assert_float32_close(x @ w.W_V[layer, h], v[:, h // (H // kv)], terms=D)
            z = torch.randn(5, H * d, generator=torch.Generator().manual_seed(layer))
            by_head = sum(z.view(5, H, d)[:, h] @ w.W_O[layer, h] for h in range(H))
            assert_float32_close(by_head, attn.o_proj(z), terms=H * d)
        assert_float32_close(x @ w.W_U, reference.lm_head(x), terms=D)


def test_the_factored_products_svd_eigenvalues_and_norm_equal_torch_linalg_on_the_whole_matrix(llama):
    ours, _ = llama
    w = weights(ours)
    for factored in (w.OV[1, 2], w.QK[0, 3]):
        whole = factored.AB.double()
        u, s, vh = factored.svd()
        r = s.shape[-1]
        assert_float32_close(s, torch.linalg.svdvals(whole)[:r], terms=whole.shape[0], magnitude=float(s.max()))
        assert_float32_close((u * s) @ vh, whole, terms=whole.shape[0] * r)
        assert_float32_close(factored.norm(), torch.linalg.norm(whole), terms=whole.numel())
        ours_eig = sorted(factored.eigenvalues.tolist(), key=lambda e: (-abs(e), e.real))
        theirs = sorted(torch.linalg.eigvals(whole).tolist(), key=lambda e: (-abs(e), e.real))[:r]
        for a, b in zip(ours_eig, theirs, strict=True):
            assert abs(a - b) <= 1e-4 * max(1.0, abs(b))
    assert isinstance(w.OV[1], FactoredMatrix) and w.OV[1].shape == (4, 32, 32)


def test_a_family_with_a_qk_norm_has_no_w_qk_and_says_why(tok):
    ours, _ = build("qwen3", tok)
    w = weights(ours)
    assert w.OV.AB.shape[-1] == w.OV.AB.shape[-2]
    with pytest.raises(ValueError, match="normalises q and k .*not x W_QK y"):
        _ = w.QK
