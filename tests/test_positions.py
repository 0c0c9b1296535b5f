"""Positions: permutation equivariance on screen, sinusoidal similarity, and rotary positions checked against
transformers' own rotary embedding and against SmolLM2's projections."""

import numpy as np
import pytest
import torch

from attention.models import attend
from attention.toy import examples as ex
from attention.toy.positions import (
    order_demo,
    position_similarity,
    rope,
    rope_pair_terms,
    rotary_toy,
    shuffled_order,
    sinusoidal_positions,
)


def smollm2_rotary(head_dim: int = 64, base: float = 100000.0):
    """transformers' LlamaRotaryEmbedding built from a config like SmolLM2-135M's (head_dim 64, θ 100000)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base},
                         max_position_embeddings=8192)
    return LlamaRotaryEmbedding(config)


def test_rope_equals_transformers_apply_rotary_pos_emb():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(0)
    n, d = 40, 64
    q, k = rng.normal(size=(2, 3, n, d)).astype(np.float32)  # (heads, n, d) each
    positions = np.arange(n)  # float32 angles (the reference) lose ~1e-7 x angle: keep them small
    emb = smollm2_rotary()
    cos, sin = emb(torch.from_numpy(q[None]), torch.from_numpy(positions[None]))
    q_ref, k_ref = apply_rotary_pos_emb(torch.from_numpy(q[None]), torch.from_numpy(k[None]), cos, sin)
    np.testing.assert_allclose(rope(q, positions, base=100000.0), q_ref[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(rope(k, positions, base=100000.0), k_ref[0].numpy(), atol=1e-5)


def test_rotated_scores_depend_only_on_relative_position():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 16))
    base = 10000.0
    for distance in (0, 3, 11):
        scores = [rope(q[None], np.array([p + distance]), base=base)[0] @ rope(k[None], np.array([p]), base=base)[0]
                  for p in (0, 5, 100, 999)]
        np.testing.assert_allclose(scores, scores[0], atol=1e-9)
    near = rope(q[None], np.array([3]))[0] @ rope(k[None], np.array([0]))[0]
    assert not np.isclose(near, q @ k)  # rotation does change the score
    back = rope(rope(q[None], np.array([42])), np.array([-42]))
    np.testing.assert_allclose(back[0], q, atol=1e-12)
    rotated = rope(np.stack([q, k]), np.array([9, 4]))
    assert rope_pair_terms(*rotated).sum() == pytest.approx(rotated[0] @ rotated[1])


def test_rotary_toy_turns_by_position_times_theta():
    toy = rotary_toy((1.0, 0.0), (1.0, 0.0), 3, 1, degrees_per_position=30)
    np.testing.assert_allclose(toy.q_rotated, [np.cos(np.pi / 2), np.sin(np.pi / 2)], atol=1e-12)
    assert toy.score == pytest.approx(np.cos(np.deg2rad(60)))  # 90° - 30°
    assert rotary_toy((1, 0.3), (0.2, 1), 8, 6).score == pytest.approx(rotary_toy((1, 0.3), (0.2, 1), 2, 0).score)


def test_shuffle_leaves_weights_without_positions_and_changes_them_with():
    cat = ex.cat_sentence()
    perm = shuffled_order(5, 4)
    assert sorted(perm) == list(range(5)) and list(perm) != list(range(5))
    plain = order_demo(cat.tokens, cat.x, cat.w_q, cat.w_k, cat.w_v, perm, positions=False)
    assert plain.max_weight_change < 1e-12 and plain.check.equivariant
    # independent check: the shuffled sentence's row for a word equals the written row, columns shuffled
    for new, old in enumerate(perm):
        np.testing.assert_allclose(plain.weights_of_permuted[new], plain.weights[old][perm], atol=1e-12)
    placed = order_demo(cat.tokens, cat.x, cat.w_q, cat.w_k, cat.w_v, perm, positions=True)
    assert placed.max_weight_change > 1e-3 and not placed.check.equivariant


def test_sinusoidal_similarity_is_a_function_of_distance():
    sim = position_similarity(60, 32)
    for delta in (0, 1, 7, 20):
        diag = np.diagonal(sim, offset=delta)
        np.testing.assert_allclose(diag, diag[0], atol=1e-9)
    pe = sinusoidal_positions(60, 32)
    np.testing.assert_allclose(np.diag(sim), (pe ** 2).sum(1))
    assert np.diag(sim) == pytest.approx(np.full(60, 16.0))  # sin² + cos² per pair


@pytest.mark.slow
def test_rotary_view_unrotates_to_smollm2s_own_projections(smollm2):
    """The page's 'before rotation' q and k equal q_proj/k_proj of the layer's normalised input, taken from the
    model's own modules; the rotated score is the model's score."""
    from attention.models.forward.model import rotary_base
    from attention.models.recorded.rotary import rotary_view

    att = attend(smollm2, "The cat sat on the mat because the cat was tired.")
    base = rotary_base(smollm2)
    assert base == smollm2.network.config.rope_parameters["rope_theta"]
    layer, head, query, key = 3, 4, len(att.tokens) - 1, 2
    view = rotary_view(att, base, layer, head, query, key)
    block = smollm2.network.model.layers[layer]
    attn = block.self_attn
    d = attn.head_dim
    with torch.no_grad():
        x = block.input_layernorm(torch.from_numpy(att.hidden[layer][None]))
        q = attn.q_proj(x)[0].view(len(att.tokens), -1, d)[:, head]
        k = attn.k_proj(x)[0].view(len(att.tokens), -1, d)[:, head // (attn.config.num_attention_heads
                                                                      // attn.config.num_key_value_heads)]
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        positions = torch.arange(len(att.tokens))[None]
        cos, sin = smollm2.network.model.rotary_emb(x, positions)  # the model's own rotary embedding
        q_rot, k_rot = apply_rotary_pos_emb(q[None, None], k[None, None], cos, sin)
    np.testing.assert_allclose(view.q_projected, q[query].numpy(), atol=2e-4)
    np.testing.assert_allclose(view.k_projected, k[key].numpy(), atol=2e-4)
    model_score = float(q_rot[0, 0, query] @ k_rot[0, 0, key]) * attn.scaling
    assert view.rotated_score == pytest.approx(model_score, abs=2e-4)
    assert view.scores_by_distance[view.distance] == pytest.approx(view.rotated_score, abs=1e-4)
    assert view.pair_terms_rotated.sum() * view.scale == pytest.approx(view.rotated_score, abs=1e-6)
