"""Why this key: a head's score split into (query part, key part) pairs, held to the score the model's own
eager kernel hands to softmax, family by family."""

import numpy as np
import pytest
import torch

from attention.models import attend, layer_windows, qk_attribution
from attention.models.forward.anatomy import FAMILIES as TABLE
from attention.models.forward.anatomy import QKFamily
from tests.tiny_models import FAMILIES as TINY
from tests.tiny_models import TEXT, build

# every tiny family whose entry in the anatomy says where q and k read (Family.qk): LayerNorm and fused q/k/v, RoPE
# and GQA, soft cap, partial rotary, post-norm, q/k norms; a family added to the table with one is swept here
FAMILIES = [name for name, family in TINY.items() if isinstance(TABLE[family.config().model_type].qk, QKFamily)]


def own_scores(reference, ids) -> list[torch.Tensor]:
    """What the reference's eager kernel hands to softmax, per layer (H, n, n): scores, scaled, capped, masked."""
    seen = []
    softmax = torch.nn.functional.softmax

    def recording(x, *args, **kwargs):
        if x.ndim == 4:
            seen.append(x[0].detach().double())
        return softmax(x, *args, **kwargs)

    torch.nn.functional.softmax = recording
    try:
        with torch.no_grad():
            reference(input_ids=torch.as_tensor(ids)[None])
    finally:
        torch.nn.functional.softmax = softmax
    return seen


@pytest.mark.parametrize("family", FAMILIES)
def test_the_pairs_add_up_to_the_score_the_models_own_kernel_computes(family, tok):
    loaded, reference = build(family, tok)
    att = attend(loaded, TEXT)
    scores = own_scores(reference, att.token_ids)
    n = len(att.tokens)
    L, H = att.self_attn.n_layers, att.self_attn.n_heads
    window = layer_windows(loaded.network.config, L)[L - 1]  # a far key, or the farthest a sliding window shows
    far = 3 if window is None else n - 2 - (window - 1)
    for layer, head, query, key in [(L - 1, H - 1, n - 2, far), (L - 1, 0, n - 1, n - 1), (0, 1, 5, 4)]:
        found = qk_attribution(loaded, att, layer, head, query, key)
        total = found.matrix.sum() + sum(found.rest.values())
        assert total == pytest.approx(found.total, rel=1e-9)
        cap = found.softcap
        seen = cap * np.tanh(total / cap) if cap else total
        want = float(scores[layer][head, query, key])
        assert seen == pytest.approx(want, rel=1e-4, abs=1e-5), (layer, head, query, key)
        assert found.score == pytest.approx(total, rel=1e-4, abs=1e-5)
        assert found.matrix.shape == (len(found.query_parts), len(found.key_parts))
        if cap is None:  # against the mean of the visible keys: the score minus their mean
            mean = qk_attribution(loaded, att, layer, head, query, key, against="mean")
            visible = scores[layer][head, query] > -1e4
            want = float(scores[layer][head, query, key] - scores[layer][head, query][visible].mean())
            assert mean.total == pytest.approx(want, rel=1e-4, abs=1e-5)
            first = int(np.flatnonzero(visible.numpy())[0])  # a second key it sees
            other = qk_attribution(loaded, att, layer, head, query, key, against=first)
            want = float(scores[layer][head, query, key] - scores[layer][head, query, first])
            assert other.total == pytest.approx(want, rel=1e-4, abs=1e-5)


def test_a_key_that_reads_only_one_planted_head_is_that_heads_column(tok):
    """Layer 1's keys read residual dimensions 0-7 only, and only layer 0's head 0 writes there (embeddings,
    other heads and the MLP zeroed on them): every key-side column but that head's is zero."""
    from attention.models import from_model

    loaded, _ = build("llama", tok)
    net = loaded.network.model
    d = net.config.hidden_size // net.config.num_attention_heads
    with torch.no_grad():
        net.embed_tokens.weight[:, :8] = 0
        o = net.layers[0].self_attn.o_proj.weight  # (D, H * d)
        o[:8, d:] = 0  # other heads write nothing to dimensions 0-7
        o[8:, :d] = 0  # head 0 writes only there
        net.layers[0].mlp.down_proj.weight[:8] = 0
        net.layers[1].self_attn.k_proj.weight[:, 8:] = 0
    loaded = from_model(loaded.network, tok, name="planted")
    att = attend(loaded, TEXT)
    for head in range(att.self_attn.n_heads):
        found = qk_attribution(loaded, att, 1, head, len(att.tokens) - 1, 4)
        column = found.key_parts.index("L1H1")
        others = np.delete(found.matrix, column, axis=1)
        assert np.abs(others).max() < 1e-9 * max(1.0, np.abs(found.matrix).max())
        assert found.largest(1)[0][1] == "L1H1"
        grouped = found.by_layer()
        assert "L1 heads" in grouped.key_parts and grouped.matrix.sum() == pytest.approx(found.matrix.sum())


@pytest.mark.parametrize("family, reason", [("bloom", "ALiBi"), ("t5", "encoder-decoder"),
                                            ("deberta_v2", "disentangled")])
def test_families_it_cannot_split_exactly_are_refused_with_the_reason(family, reason, tok):
    loaded, _ = build(family, tok)
    att = attend(loaded, TEXT)
    with pytest.raises(ValueError, match=reason):
        qk_attribution(loaded, att, 0, 0, 3, 1)


@pytest.mark.slow
def test_smollm2s_induction_heads_win_on_the_previous_token_heads_key(smollm2):
    """What the page says: on the induction probe, the strongest induction head's largest pair (against the
    mean key) has the strongest previous-token head on the key side."""
    from attention.models import PROBE_REPEAT, head_roles

    roles = head_roles(smollm2)
    layer, head = np.unravel_index(np.argmax(roles.induction), roles.induction.shape)
    previous = np.unravel_index(np.argmax(roles.previous_token[:layer]), roles.previous_token[:layer].shape)
    query = len(roles.probe.tokens) - 10  # in the second copy of the random tokens
    found = qk_attribution(smollm2, roles.probe, int(layer), int(head), query, query - PROBE_REPEAT + 1,
                           against="mean")
    assert found.total == pytest.approx(found.score, rel=1e-4)
    assert found.largest(1)[0][1] == f"L{previous[0] + 1}H{previous[1] + 1}"


def test_the_key_to_start_with_is_the_strongest_that_is_not_the_first_token():
    from attention.models import key_choices

    assert key_choices(np.array([0.7, 0.0, 0.2, 0.1])) == ([0, 2, 3], 2)  # the masked key is not offered
    assert key_choices(np.array([1.0, 0.0, 0.0])) == ([0], 0)  # only the sink has weight
