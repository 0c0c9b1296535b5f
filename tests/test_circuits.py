"""What heads do: roles, direct logit attribution, the logit lens, patching and composition, each against an
independent reference (the model's own eager weights and logits, numpy on the weight matrices)."""

import dataclasses

import numpy as np
import pytest
import torch

from attention.models import attend
from attention.models.analyses.composition_scores import composition, head_matrices
from attention.models.analyses.patching import activation_patching
from attention.models.analyses.readout import direct_logit_attribution, logit_lens, residual_stream
from attention.models.analyses.roles import probe_attention, probe_ids, roles_of
from attention.models.analyses.target_foil import contrast, swap_words
from tests.numerics import float32_approx
from tests.test_stats import fake_attention
from tests.tiny_models import build

CLEAN = "the cat sat on the mat because the dog was"


@pytest.fixture(scope="module")
def llama(tok):
    return build("llama", tok)


@pytest.mark.numeric
def test_role_scores_equal_the_models_own_weights_on_the_probe(llama, tok):
    loaded, reference = llama
    att, first = probe_attention(loaded, repeat=6, seed=3)
    roles = roles_of(att, 6, first)
    ids = torch.tensor(probe_ids(tok, 6, 3)[0])[None]
    with torch.no_grad():
        own = np.stack([a[0].numpy() for a in reference(input_ids=ids, output_attentions=True).attentions])
    second = [i for i in range(first + 6, first + 12)]
    width = reference.config.hidden_size  # our pass and the reference's eager one sum in their own orders

    def near(values):
        return float32_approx(np.mean(values), terms=width, magnitude=1.0)

    for layer in range(2):
        for head in range(4):
            w = own[layer, head]
            assert roles.induction[layer, head] == near([w[i, i - 5] for i in second])
            assert roles.duplicate_token[layer, head] == near([w[i, i - 6] for i in second])
            assert roles.previous_token[layer, head] == near([w[i, i - 1] for i in range(1, 13)])
            assert roles.first_token[layer, head] == near(w[1:, 0])


def test_planted_previous_token_and_induction_heads_score_highest():
    """Head 0 of layer 0 attends to the previous token; head 1 of layer 1 to the token after the current
    one's earlier occurrence; the others spread evenly (causal)."""
    repeat, first = 5, 1
    n = first + 2 * repeat
    causal = np.tri(n)
    spread = causal / causal.sum(-1, keepdims=True)
    previous = np.eye(n, k=-1)
    previous[0, 0] = 1
    induction = spread.copy()
    for i in range(first + repeat, n):
        induction[i] = 0
        induction[i, i - repeat + 1] = 1
    w = np.stack([np.stack([previous, spread]), np.stack([spread, induction])])  # (2 layers, 2 heads, n, n)
    values = np.zeros((2, 2, n, 4))  # (not drawn from test_stats' generator: its other tests keep their draws)
    roles = roles_of(fake_attention(w, [f"t{i}" for i in range(n)], v=values), repeat, first)
    assert np.unravel_index(roles.previous_token.argmax(), (2, 2)) == (0, 0)
    assert np.unravel_index(roles.induction.argmax(), (2, 2)) == (1, 1)
    assert roles.labels()[0, 0] == "previous-token" and roles.labels()[1, 1] == "induction"


@pytest.mark.parametrize("family", ["llama", "gpt2", "gpt_neox"])
def test_direct_shares_add_up_to_the_models_own_logit_difference(family, tok):
    loaded, reference = build(family, tok)
    att = attend(loaded, CLEAN)
    pair = contrast(att, tok, " dog", " cat")
    parts = direct_logit_attribution(loaded, att, pair)
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor(att.token_ids)[None]).logits[0, -1]
    own = float(logits[pair.target.token_id] - logits[pair.foil.token_id])
    assert parts.total == pytest.approx(own, abs=1e-3)
    assert parts.heads.sum() + parts.mlps.sum() + parts.embeddings + parts.biases == pytest.approx(parts.total)


def test_the_logit_lens_last_layer_is_the_models_own_prediction(llama, tok):
    loaded, reference = llama
    att = attend(loaded, CLEAN)
    lens = logit_lens(loaded, att, target=contrast(att, tok, " dog", " cat").target)
    with torch.no_grad():
        p = torch.softmax(reference(input_ids=torch.tensor(att.token_ids)[None]).logits[0].double(), -1).numpy()
    assert lens.top_ids.shape == (3, len(att.tokens))  # embeddings and 2 layers, every position
    np.testing.assert_array_equal(lens.top_ids[-1], p.argmax(-1))
    np.testing.assert_allclose(lens.top_probability[-1], p.max(-1), atol=1e-5)
    np.testing.assert_allclose(lens.target_probability[-1], p[:, lens.target.token_id], atol=1e-5)


@pytest.mark.parametrize("name", ["phi", "gemma2", "gpt2"])  # an LM head with a bias, a logit soft cap, tied weights
def test_the_logit_lens_last_row_is_each_familys_own_prediction(name, tok):
    loaded, reference = build(name, tok)
    att = attend(loaded, CLEAN)
    lens = logit_lens(loaded, att)
    with torch.no_grad():
        logits = reference(input_ids=torch.tensor(att.token_ids)[None]).logits[0].double()
    p = torch.softmax(logits, -1).numpy()  # the reference's logits are already capped (Gemma-2)
    np.testing.assert_array_equal(lens.top_ids[-1], p.argmax(-1))
    np.testing.assert_allclose(lens.top_probability[-1], p.max(-1), atol=1e-5)


def test_the_logit_lens_reads_a_pass_of_its_own_when_the_last_hidden_state_is_not_the_final_norms(llama, tok,
                                                                                                       monkeypatch):
    """A family whose last hidden state is not the final norm's output (its logits are not the model's own):
    the lens reads the streams from residual_stream instead, and says what the model says."""
    from attention.models.analyses import readout

    loaded, reference = llama
    att = attend(loaded, CLEAN)
    target = contrast(att, tok, " dog", " cat").target
    calls = []
    monkeypatch.setattr(readout, "residual_stream", lambda *args: calls.append(1) or residual_stream(*args))
    lens = logit_lens(loaded, att, target=target)
    assert not calls  # this family's last hidden state is the final norm's output
    unnormed = dataclasses.replace(att, hidden=np.concatenate([att.hidden[:-1], att.hidden[-2:-1]]))
    again = logit_lens(loaded, unnormed, target=target)
    assert calls
    with torch.no_grad():
        p = torch.softmax(reference(input_ids=torch.tensor(att.token_ids)[None]).logits[0].double(), -1).numpy()
    np.testing.assert_array_equal(again.top_ids, lens.top_ids)
    np.testing.assert_allclose(again.top_probability[-1], p.max(-1), atol=1e-5)
    np.testing.assert_allclose(again.target_probability, lens.target_probability, atol=1e-5)


def test_patching_restores_everything_at_the_end_and_nothing_where_the_prompts_agree(llama, tok):
    loaded, _ = llama
    corrupt_text = swap_words(CLEAN, "cat", "dog")
    assert corrupt_text == "the dog sat on the mat because the cat was"
    clean, corrupt = attend(loaded, CLEAN), attend(loaded, corrupt_text)
    pair = contrast(clean, tok, " dog", " cat")
    residual = activation_patching(loaded, clean, corrupt, pair, site="residual")
    n = len(clean.tokens)
    assert residual.effect.shape == (3, n)
    assert residual.effect[-1, -1] == pytest.approx(1.0, abs=1e-4)  # the final stream at the last position
    same = [i for i in range(n) if clean.tokens[i] == corrupt.tokens[i]]
    np.testing.assert_allclose(residual.effect[0, same], 0.0, atol=1e-4)  # identical embeddings there
    heads = activation_patching(loaded, clean, corrupt, pair, site="heads")
    assert heads.effect.shape == (2, 4) and np.isfinite(heads.effect).all()
    with pytest.raises(ValueError, match="same positions"):
        activation_patching(loaded, clean, attend(loaded, CLEAN + " quite"), pair)


def test_composition_equals_numpy_on_the_full_matrices(llama):
    loaded, _ = llama
    got = composition(loaded, 1, 2)
    w0, w1 = (head_matrices(loaded, layer) for layer in (0, 1))
    qk = (w1["W_Q"][2] @ w1["W_K"][2].T).numpy()  # (D, D) the reader's
    ov_r = (w1["W_V"][2] @ w1["W_O"][2]).numpy()
    for h in range(4):
        ov = (w0["W_V"][h] @ w0["W_O"][h]).numpy()

        def score(a, b, x, y):
            return np.linalg.norm(a @ b) / (np.linalg.norm(x) * np.linalg.norm(y))
        assert got.q[0, h] == pytest.approx(score(ov, qk, ov, qk), rel=1e-6)
        assert got.k[0, h] == pytest.approx(score(qk, ov.T, qk, ov), rel=1e-6)
        assert got.v[0, h] == pytest.approx(score(ov, ov_r, ov, ov_r), rel=1e-6)
