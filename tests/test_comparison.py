"""Two results compared head by head (issue 44's API): the distance is the mean Jensen–Shannon divergence of
the heads' rows, checked against the formula written out with Python floats."""

import math

import numpy as np
import pytest

from attention.models import compare_heads, from_attentions, js_divergence

TOKENS = ["[CLS]", "the", "river", "bank", "[SEP]"]


def _jsd(p, q) -> float:
    """JSD in bits, one pair of rows, term by term."""
    total = 0.0
    for a, b in zip(p, q, strict=True):
        m = (a + b) / 2
        total += (a * math.log2(a / m) if a > 0 else 0.0) + (b * math.log2(b / m) if b > 0 else 0.0)
    return total / 2


def _random_weights(rng, layers=2, heads=3):
    n = len(TOKENS)
    z = rng.normal(size=(layers, 1, heads, n, n)) * 3
    w = np.exp(z)
    return w / w.sum(axis=-1, keepdims=True)


def test_the_distance_is_the_mean_jsd_of_each_heads_rows():
    rng = np.random.default_rng(0)
    wa, wb = _random_weights(rng), _random_weights(rng)
    a, b = from_attentions(TOKENS, list(wa)), from_attentions(TOKENS, list(wb))
    cmp = compare_heads(a, b)
    for layer in range(2):
        for head in range(3):
            expected = np.mean([_jsd(wa[layer, 0, head, i], wb[layer, 0, head, i]) for i in range(len(TOKENS))])
            assert cmp.distance[layer, head] == pytest.approx(expected, abs=1e-6)
    assert np.allclose(compare_heads(a, a).distance, 0.0, atol=1e-6)  # a result against itself
    layer, head, value = cmp.largest(1)[0]
    assert value == cmp.distance.max() and cmp.distance[layer, head] == value
    assert len(cmp.largest(100)) == 6 and [v for *_, v in cmp.largest(6)] == sorted(cmp.distance.ravel())[::-1]


def test_the_jsd_is_0_for_the_same_row_and_1_for_rows_with_no_key_in_common():
    assert js_divergence([0.5, 0.5, 0.0], [0.5, 0.5, 0.0]) == 0
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)


def test_results_that_cannot_be_compared_are_refused_with_the_reason():
    rng = np.random.default_rng(1)
    a = from_attentions(TOKENS, list(_random_weights(rng)))
    with pytest.raises(ValueError, match="different tokens"):
        compare_heads(a, from_attentions(["[CLS]", "a", "b", "c", "[SEP]"], list(_random_weights(rng))))
    with pytest.raises(ValueError, match="words=True"):
        compare_heads(a, from_attentions(TOKENS, list(_random_weights(rng, heads=2))))


def test_two_models_are_compared_on_words_each_head_matched_to_its_nearest(minilm, smollm2):
    text = "I sat on the river bank."
    a, b = minilm.attend(text), smollm2.attend(text)
    with pytest.raises(ValueError, match="words=True"):
        compare_heads(a, b)
    cmp = compare_heads(a, b, words=True)
    assert cmp.match.shape == (6, 12, 2) and cmp.distance.shape == (6, 12)
    assert [w.lower() for w in cmp.labels] == ["i", "sat", "on", "the", "river", "bank", "."]
    # head L1H1 of MiniLM against every head of SmolLM2, by hand on the words' weights
    from attention.models import word_level

    def words_only(att):
        w = word_level(att)
        keep = ~np.asarray(w.special, bool)
        x = w.weights[:, :, keep][:, :, :, keep].astype(np.float64)
        return x / x.sum(axis=-1, keepdims=True)

    wa, wb = words_only(a), words_only(b)
    by_hand = np.array([[np.mean([_jsd(wa[0, 0, i], wb[lb, hb, i]) for i in range(len(cmp.labels))])
                         for hb in range(wb.shape[1])] for lb in range(wb.shape[0])])
    assert cmp.match_distance[0, 0] == pytest.approx(by_hand.min(), abs=1e-6)
    assert tuple(cmp.match[0, 0]) == np.unravel_index(by_hand.argmin(), by_hand.shape)
    assert np.array_equal(cmp.distance, cmp.match_distance)  # other shapes: each head's distance is its match's
