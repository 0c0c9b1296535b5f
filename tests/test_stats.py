"""Aggregations, views and head statistics against direct computations and hand-made patterns."""

import re

import numpy as np
import pytest
import torch

from attention.models.forward.attention_stack import AttentionStack
from attention.models.forward.head_survey import distance_buckets
from attention.models.forward.model_attention import ModelAttention
from attention.models.forward.survey_pass import survey
from attention.models.forward.tokens import find_word
from attention.models.recorded.aggregations import AGGREGATIONS, aggregate, attention_row, norm_weights, rollout
from attention.models.recorded.ambiguous_words import compare_word, token_distribution_shift
from attention.models.recorded.views import Reading, drop_tokens, line_view, query_row, token_focus, zoom

rng = np.random.default_rng(4)


def fake_attention(weights, tokens, special=None, v=None, w_o=None):
    """A ModelAttention around given weights (L, H, n, n), kept as the model's own (the T5 path), for
    statistics that only read weights."""
    L, H, n, _ = weights.shape
    d = 4
    v = rng.normal(size=(L, H, n, d)) if v is None else v
    stack = AttentionStack(q=np.zeros((L, H, n, d)), k=np.zeros((L, H, n, d)), v=v, masks=(None,) * L,
                           exactly_causal=(False,) * L, causal=False,
                           scale=0.5, bias=True, modules=tuple(f"layer.{i}" for i in range(L)),
                           w_o=None if w_o is None else tuple(w_o), own_weights=np.asarray(weights))
    return _attention(stack, tokens, special)


def random_attention(L=2, H=4, n=13, d=8, kv=2, causal=False, special=None, tokens=None):
    """A ModelAttention whose weights are recomputed from random q and k (grouped KV heads), the way real
    models' are."""
    q = rng.normal(size=(L, H, n, d)).astype(np.float32)
    k = rng.normal(size=(L, kv, n, d)).astype(np.float32)
    mask = np.tri(n, dtype=bool) if causal else None
    stack = AttentionStack(q=q, k=k, v=k.copy(), masks=(mask,) * L, exactly_causal=(causal,) * L, causal=causal,
                           scale=d ** -0.5, bias=False,
                           modules=tuple(f"layer.{i}" for i in range(L)), w_o=None)
    return _attention(stack, tokens or [f"t{i}" for i in range(n)], special)


def _attention(stack, tokens, special):
    n = len(tokens)
    return ModelAttention(model_name="fake", text=" ".join(tokens), architecture="encoder-only", tokens=tuple(tokens),
                          token_ids=np.arange(n),
                          special=np.zeros(n, bool) if special is None else np.asarray(special), self_attn=stack,
                          hidden=rng.normal(size=(stack.n_layers + 1, n, 8)), truncated=False, n_input_tokens=n)


def random_rows(*shape):
    w = rng.random(shape)
    return w / w.sum(-1, keepdims=True)


def test_rollout_is_the_product_of_mixed_layers():
    w = random_rows(3, 2, 5, 5)
    mixed = [0.5 * w[layer].mean(0) + 0.5 * np.eye(5) for layer in range(3)]
    mixed = [m / m.sum(-1, keepdims=True) for m in mixed]
    expected = mixed[2] @ mixed[1] @ mixed[0]
    np.testing.assert_allclose(rollout(w.mean(1))[2], expected, atol=1e-12)
    np.testing.assert_allclose(rollout(w.mean(1)).sum(-1), 1.0, atol=1e-12)


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
    np.testing.assert_allclose(norm_weights(att, 1, head=2), one, rtol=1e-5)  # float32, as the models compute
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
    stats = survey(att)
    assert stats.head_types[0].tolist() == ["previous-token", "next-token", "sink", "broad"]
    assert stats.previous[0, 0] == pytest.approx(1.0)
    assert stats.entropy[0, 3] == pytest.approx(np.log(n))
    assert stats.punctuation[0, 3] == pytest.approx(1 / n)
    assert stats.mean_distance[0, 0] == pytest.approx(5 / 6)  # every row one token back, but the first
    assert stats.majority_share[0, 2, 0] == pytest.approx(1.0)  # the sink holds over half of every row


@pytest.mark.parametrize("causal,rows", [(False, 37), (True, 37), (False, 5), (True, 5), (True, 1)])
def test_survey_equals_direct_sums_over_recomputed_weights(causal, rows, monkeypatch):
    """One chunked pass over q and k must give what the materialised weights give, summed by hand: in one
    chunk, and in chunks of 5 rows or 1, which cut across the 2-row tiles."""
    from attention.models.forward import survey_sums

    monkeypatch.setattr(survey_sums, "SURVEY_CHUNK_FLOATS", 4 * 37 * rows)
    att = random_attention(L=2, H=4, n=37, causal=causal, special=[True] + [False] * 36)
    w = att.weights.astype(np.float64)  # (L, H, n, n), recomputed head by head
    got = survey(att)
    n = 37
    np.testing.assert_allclose(got.entropy, (-w * np.log(np.where(w > 0, w, 1))).sum(-1).mean(-1), atol=1e-5)
    np.testing.assert_allclose(got.column_mass, w.mean(-2), atol=1e-6)
    np.testing.assert_allclose(got.majority_share, (w > 0.5).mean(-2), atol=1e-9)
    np.testing.assert_allclose(got.special_mass, w[..., 0].mean(-1), atol=1e-6)
    i, j = np.indices((n, n))
    np.testing.assert_allclose(got.previous, (w * (i - j == 1)).sum((-1, -2)) / (n - 1), atol=1e-6)
    np.testing.assert_allclose(got.next, (w * (i - j == -1)).sum((-1, -2)) / (n - 1), atol=1e-6)
    np.testing.assert_allclose(got.mean_distance, (w * np.abs(i - j)).sum((-1, -2)) / n, atol=1e-4)
    for offset in (-30, -3, 0, 2, 36):
        pairs = ((i - j == offset) & (j <= i if causal else True)).sum()
        assert (got.offset_pairs[:, offset + n - 1] == pairs).all()
    tiles, block = got.tiles, got.block
    assert block == 2 and tiles.shape == (2, 4, 19, 19)
    np.testing.assert_allclose(tiles[1, 3, 5, 7], w[1, 3, 10:12, 14:16].max(), atol=1e-6)
    padded = np.zeros((2, 4, 38, 38))
    padded[..., :37, :37] = w
    np.testing.assert_allclose(tiles, padded.reshape(2, 4, 19, 2, 19, 2).max((3, 5)), atol=1e-6)
    profile = got.distance_profile()
    assert (profile.ranges[:, 0] >= 0).all() == causal  # a causal model has no key after its query
    at = next(b for b, (lo, hi) in enumerate(profile.ranges) if lo == 4)  # offsets 4-5
    in_range = (i - j >= 4) & (i - j < 6)
    np.testing.assert_allclose(profile.mean_weight[..., at], (w * in_range).sum((-1, -2)) / in_range.sum(), atol=1e-6)


def test_distance_buckets_cover_every_offset_once():
    ranges = distance_buckets(100)
    covered = np.concatenate([np.arange(lo, hi) for lo, hi in ranges])
    assert len(covered) == len(set(covered.tolist()))  # no offset in two ranges
    assert (np.sort(covered) == np.arange(covered.min(), covered.max() + 1)).all()  # no gap
    assert covered.min() <= -99 and covered.max() >= 99
    assert [tuple(r) for r in ranges if -1 <= r[0] <= 2] == [(-1, 0), (0, 1), (1, 2), (2, 3)]  # single offsets


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
    np.testing.assert_allclose(view.matrix, w[1, 2], atol=1e-7)  # views are float32, as models compute
    hidden = zoom(att, "head", layer=1, head=2, hide_special=True)
    assert hidden.row_labels == hidden.col_labels == ("a", "b")
    np.testing.assert_allclose(hidden.matrix, w[1, 2, 1:3, 1:3] / w[1, 2, 1:3, 1:3].sum(-1, keepdims=True),
                               atol=1e-7)  # float32, as above: a relative 1e-7 alone fails on some draws
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


def test_recomputed_views_agree_with_the_materialised_weights():
    att = random_attention(L=2, H=4, n=9, causal=True)
    w = att.weights
    np.testing.assert_allclose(att.head_weights(1, 3), w[1, 3], atol=1e-7)
    np.testing.assert_allclose(aggregate(att, "mean", layer=1), w[1].mean(0), atol=1e-6)
    np.testing.assert_allclose(aggregate(att, "max", layer=0), w[0].max(0), atol=1e-7)
    np.testing.assert_allclose(att.self_attn.query_rows(4), w[:, :, 4], atol=1e-7)
    trace = att.head_trace(1, 3, query=4)
    np.testing.assert_allclose(trace.weights[0], w[1, 3, 4], atol=1e-6)
    assert trace.weights.shape == (1, 9) and trace.weights[0, 5:].sum() == 0  # causal: nothing after the query


def test_a_long_zoom_comes_back_as_block_maxima():
    att = random_attention(L=1, H=2, n=600, d=4, kv=1)
    view = zoom(att, "head", layer=0, head=1, max_shown=200)
    assert view.matrix.shape == (200, 200) and "block maxima of 3×3" in view.title
    np.testing.assert_allclose(view.matrix[10, 20], att.head_weights(0, 1)[30:33, 60:63].max(), atol=1e-7)
    assert view.row_labels[10] == "30–32 t30…"
    with pytest.raises(ValueError, match="up to 1,024 tokens"):
        aggregate(random_attention(L=1, H=1, n=1100, d=2, kv=1), "rollout", layer=0)


def sinks_by_hand(w, special):
    """The sink rule written out on materialised weights: the first and special tokens, and keys holding
    over half the weight in over half the rows. Shapes: w (n, n) -> (n,) bool."""
    n = w.shape[-1]
    return np.asarray(special, bool) | (np.arange(n) == 0) | ((w > 0.5).mean(0) > 0.5)


def test_every_view_removes_the_sinks_the_rule_finds():
    """A head whose rows mostly pile on "b" (not special), another that piles on nothing: each view, given
    only Reading(without_sinks=True), removes exactly that head's sinks and rescales what is left."""
    n = 6
    spread = random_rows(n, n) * 0.4  # no key reaches half a row
    piled = spread.copy()
    piled[:4, 2] = 3.0  # four of six rows put most of their weight on "b"
    piled /= piled.sum(-1, keepdims=True)
    spread /= spread.sum(-1, keepdims=True)
    w = np.stack([piled, spread])[None]  # (1 layer, 2 heads, n, n)
    special = [True, False, False, False, False, True]
    att = fake_attention(w, ["[CLS]", "a", "b", "c", "d", "[SEP]"], special=special)
    gone = [sinks_by_hand(w[0, h], special) for h in range(2)]
    assert gone[0].tolist() == [True, False, True, False, False, True] and not gone[1][2]
    reading = Reading(without_sinks=True)

    def rescaled(rows, g):
        kept = np.where(g, 0.0, rows)
        return kept / kept.sum(-1, keepdims=True)

    for h in range(2):
        view = zoom(att, "head", layer=0, head=h, reading=reading)
        np.testing.assert_allclose(view.matrix, rescaled(w[0, h], gone[h]), atol=1e-6)
        assert not view.mask[:, gone[h]].any() and view.sinks == tuple(np.array(att.tokens)[gone[h]])
        row = query_row(att, 3, layer=0, head=h, reading=reading)
        np.testing.assert_allclose(row.matrix[0], rescaled(w[0, h, 3], gone[h]), atol=1e-6)
        lines = line_view(att, 0, [h], reading=reading)
        drawn = {(int(i), int(j)) for i, j, _ in lines.lines[0]}
        assert not any(gone[h][j] for _, j in drawn)
    mean = zoom(att, "mean", layer=0, reading=reading)  # over heads: the sinks of any head of the layer
    np.testing.assert_allclose(mean.matrix, rescaled(w[0].mean(0), gone[0] | gone[1]), atol=1e-6)
    focus = token_focus(att, 3, reading=reading)  # each head's row without its own sinks
    np.testing.assert_allclose(focus.matrix, [rescaled(w[0, h, 3], gone[h]) for h in range(2)], atol=1e-6)
    plain = zoom(att, "head", layer=0, head=0)
    assert plain.sinks == () and not plain.reading.without_sinks


def test_the_survey_and_the_views_count_sinks_alike():
    """The survey leaves the majority counts of its own pass for the views; counting them afresh (a text
    no survey has seen) gives the same sinks."""
    att = random_attention(L=2, H=4, n=23, causal=True, special=[True] + [False] * 22)
    counted = [att.self_attn.majority_share(layer).copy() for layer in range(2)]
    att.self_attn.derived.majority_share.clear()
    found = survey(att)
    for layer in range(2):
        np.testing.assert_allclose(att.self_attn.majority_share(layer), counted[layer], atol=1e-6)
        np.testing.assert_array_equal(found.sinks[layer], [att.head_sinks(layer, h) for h in range(4)])
