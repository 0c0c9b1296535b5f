"""The seeds' examples reproduce the numbers the articles publish, and the toy ambiguity resolves."""

import numpy as np
import pytest

from attention import hard_lookup, permutation_check, scaled_dot_product_attention, sinusoidal_positions, soft_lookup
from attention.toy import examples as ex
from attention.toy.ambiguity import bank_attention, it_attention
from attention.toy.core import attention_from_embeddings


def test_fruit_scaled_scores_match_article():
    trace = scaled_dot_product_attention(ex.FRUIT_QUERY[None], ex.FRUIT_KEYS, ex.FRUIT_VALUES)
    assert np.round(trace.scaled[0], 2).tolist() == list(ex.FRUIT_PUBLISHED_SCORES)


def test_hard_lookup_answers_apple_not_fruit():
    assert hard_lookup(ex.FRUIT_HARD, "apple").value == 9
    fruit = hard_lookup(ex.FRUIT_HARD, "fruit")
    assert not fruit.found and fruit.value is None and sum(fruit.probabilities.values()) == 0
    # "Exact keys only": capitals too (a first-year's "Apple" was answered 9 under that heading, issue 68).
    capital = hard_lookup(ex.FRUIT_HARD, "Apple")
    assert not capital.found and capital.value is None and capital.near == "apple"
    assert hard_lookup(ex.FRUIT_HARD, " apple ").value == 9 and fruit.near is None


def test_a_tie_has_no_winner_on_the_page_or_in_the_live_frames():
    """All three query features at 0: every item 0.333, and "apple wins with 33.3%" named a winner of a tie."""
    from attention.toy.live import winners_or_ties

    tied = soft_lookup([0, 0, 0], ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS)
    assert tied.tie and np.allclose(tied.weights, 1 / 3)
    assert not soft_lookup(ex.FRUIT_QUERY, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS).tie
    w = np.array([[1 / 3, 1 / 3, 1 / 3], [0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.2, 0.4004, 0.3996]])
    assert winners_or_ties(w).tolist() == [3, 0, 3, 3]  # equal to 3 decimals is a tie too


def test_soft_lookup_answers_fruit_with_a_blend():
    res = soft_lookup(ex.FRUIT_QUERY, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS)
    assert res.winner == "apple"
    assert np.all(res.weights > 0) and res.weights.sum() == pytest.approx(1)
    chairish = soft_lookup([0.1, 0.9, 0.2], ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS)
    assert chairish.winner == "chair"


def test_thinking_machines_published_numbers():
    tm = ex.thinking_machines()
    trace = attention_from_embeddings(tm.x, tm.w_q, tm.w_k, tm.w_v)
    assert tm.q.shape == (2, 64) and tm.x.shape == (2, 512)
    np.testing.assert_allclose(trace.scores[0], [112, 96], atol=1e-8)
    np.testing.assert_allclose(trace.scaled[0], [14, 12], atol=1e-9)
    assert np.round(trace.weights[0], 2).tolist() == [0.88, 0.12]


def test_permutation_equivariance_without_positions_only():
    s = ex.cat_sentence()
    perm = np.array([4, 2, 0, 1, 3])
    assert permutation_check(s.x, s.w_q, s.w_k, s.w_v, perm).equivariant
    pe = sinusoidal_positions(5, 4)
    assert not permutation_check(s.x, s.w_q, s.w_k, s.w_v, perm, positions=pe).equivariant


def test_sinusoidal_positions_formula():
    pe = sinusoidal_positions(6, 5)
    assert pe.shape == (6, 5)
    assert pe[3, 2] == pytest.approx(np.sin(3 / 10000 ** (2 / 5)))
    assert pe[3, 3] == pytest.approx(np.cos(3 / 10000 ** (2 / 5)))


def test_bank_resolves_by_context():
    river, money = (bank_attention(s) for s in ex.BANK_SENTENCES)
    assert river.tokens[int(np.argmax(river.trace.weights[river.focus]))] == "river"
    assert money.tokens[int(np.argmax(money.trace.weights[money.focus]))] == "money"
    assert river.sense[0] > river.sense[1] and money.sense[1] > money.sense[0]
    flat = bank_attention(ex.BANK_SENTENCES[0], pull=0.0)
    np.testing.assert_allclose(flat.trace.weights[flat.focus], 1 / len(flat.tokens))


def test_it_resolves_in_two_layers():
    tired, wide = (it_attention(s) for s in ex.IT_SENTENCES)
    for res, noun, adjective in ((tired, "animal", "tired"), (wide, "street", "wide")):
        assert res.tokens[int(np.argmax(res.layer1.weights[res.focus]))] == adjective
        assert res.tokens[int(np.argmax(res.layer2.weights[res.focus]))] == noun
    assert tired.sense[0] > tired.sense[1] and wide.sense[1] > wide.sense[0]


def test_toy_vocab_errors_are_clear():
    with pytest.raises(ValueError, match="unknown word"):
        bank_attention("I sat on the sofa bank")
    with pytest.raises(ValueError, match="must contain the word 'bank'"):
        bank_attention("I sat on the river")
