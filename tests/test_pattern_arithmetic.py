"""One pattern per question (issue 72): run_with_cache's hook_pattern is, by default, attend()'s arithmetic (float32
weights from the q and k the layer's kernel got), and the model's own 16-bit pattern on request (pattern="model").
Held to transformers' own bfloat16 model (output_attentions) and its own eager function in float32."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from attention.models import attend, from_model, hooks, run_with_cache
from tests.numerics import assert_float32_close
from tests.tiny_models import TEXT, build

PATTERN = "blocks.{}.attn.hook_pattern"


@pytest.fixture(scope="module")
def sixteen(tok):
    """(ours in bfloat16, transformers' own twin in bfloat16, ours in float32, ids): a tiny random Llama."""
    ours32, reference = build("llama", tok)
    reference16 = copy.deepcopy(reference).to(torch.bfloat16)
    ours16 = from_model(copy.deepcopy(reference16), tok, name="llama-bf16")
    return ours16, reference16, ours32, torch.tensor(tok(TEXT)["input_ids"])[None]


def test_the_default_pattern_is_attends_float32_and_model_is_the_models_own_bfloat16(sixteen):
    ours16, reference16, _, ids = sixteen
    patterns = lambda name: name.endswith("hook_pattern")  # noqa: E731
    _, default = run_with_cache(ours16, ids, patterns)
    _, own = run_with_cache(ours16, ids, patterns, pattern="model")
    with torch.no_grad():
        theirs = reference16(input_ids=ids, output_attentions=True).attentions  # transformers' own, bfloat16
    for layer, expected in enumerate(theirs):
        assert own[PATTERN.format(layer)].dtype == torch.bfloat16
        assert torch.equal(own[PATTERN.format(layer)], expected)  # the model's own, bit for bit
        assert default[PATTERN.format(layer)].dtype == torch.float32
    # layer 0's inputs are the same in every pass (later layers' come through the pass's own 16-bit kernels): the
    # default there is attend()'s recomputed weights, and transformers' eager function run in float32 by hand
    att = attend(ours16, TEXT)
    assert_float32_close(default[PATTERN.format(0)][0], att.self_attn.layer_weights(0), terms=ids.shape[1])
    q, k = _layer0_qk(reference16, ids)
    scores = q.float() @ k.float().transpose(-1, -2) * q.shape[-1] ** -0.5
    by_hand = torch.softmax(scores + torch.triu(torch.full_like(scores[0, 0], float("-inf")), 1), dim=-1)
    assert_float32_close(default[PATTERN.format(0)], by_hand, terms=q.shape[-1])
    gap = (default[PATTERN.format(0)] - own[PATTERN.format(0)].float()).abs().max()
    assert 0 < gap < 0.05  # two arithmetics, one question: they differ by bfloat16's rounding of the scores


def _layer0_qk(reference16, ids):
    """Layer 0's q and k after rotary positions, made with transformers' own modules and function by hand; k's
    KV heads repeated for the query heads (grouped-query attention)."""
    import importlib

    modeling = importlib.import_module(type(reference16).__module__)
    attn, x = reference16.model.layers[0].self_attn, reference16.model.embed_tokens(ids)
    h = reference16.model.layers[0].input_layernorm(x)
    d = attn.head_dim
    q = attn.q_proj(h).unflatten(-1, (-1, d)).transpose(1, 2)
    k = attn.k_proj(h).unflatten(-1, (-1, d)).transpose(1, 2)
    cos, sin = reference16.model.rotary_emb(x, torch.arange(ids.shape[1])[None])
    q, k = modeling.apply_rotary_pos_emb(q, k, cos, sin)
    return q.detach(), k.detach().repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def test_a_float32_model_has_one_pattern_and_an_edited_16_bit_pattern_needs_model(sixteen):
    ours16, _, ours32, ids = sixteen
    _, default = run_with_cache(ours32, ids, PATTERN.format(1))
    _, own = run_with_cache(ours32, ids, PATTERN.format(1), pattern="model")
    assert torch.equal(default[PATTERN.format(1)], own[PATTERN.format(1)])

    def halve(p, hook):
        return p * 0.5
    with hooks(ours16, [(PATTERN.format(1), halve)]):
        with pytest.raises(ValueError, match='pattern="model"'):
            run_with_cache(ours16, ids, PATTERN.format(1))
        _, edited = run_with_cache(ours16, ids, PATTERN.format(1), pattern="model")
    _, plain = run_with_cache(ours16, ids, PATTERN.format(1), pattern="model")
    np.testing.assert_array_equal(edited[PATTERN.format(1)].float().numpy(),
                                  (plain[PATTERN.format(1)] * 0.5).float().numpy())
    with pytest.raises(ValueError, match="not 'fp16'"):
        run_with_cache(ours16, ids, pattern="fp16")
