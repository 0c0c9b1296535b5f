"""What a weight does not say (issue 74): the weighted value norms and ALTI held to implementations written here from
the papers' equations on transformers' own modules and attentions (tiny random models and their plain twins), and
the sum the norms split up held to the head's own output (hook_result)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention.models import (
    alti,
    attend,
    first_token_shares,
    query_row,
    row_contributions,
    run_with_cache,
    weighted_value_norms,
)
from tests.numerics import assert_float32_close
from tests.tiny_models import TEXT, build


@pytest.fixture(scope="module")
def llama(tok):
    return build("llama", tok)


def _own(reference, ids):
    with torch.no_grad():
        return reference(input_ids=ids, output_attentions=True, output_hidden_states=True)


def _llama_f(reference, x: torch.Tensor, layer: int) -> torch.Tensor:
    """(H, n, D): each head's v_j W_O^h from transformers' own modules: its norm, v_proj, o_proj's weight."""
    block, config = reference.model.layers[layer], reference.config
    H, KV, D = config.num_attention_heads, config.num_key_value_heads, config.hidden_size
    d = D // H
    with torch.no_grad():
        v = block.self_attn.v_proj(block.input_layernorm(x)).reshape(-1, KV, d)  # (n, KV, d)
        v = v.repeat_interleave(H // KV, dim=1).transpose(0, 1)  # (H, n, d)
        w_o = block.self_attn.o_proj.weight.T.reshape(H, d, D)
        return torch.einsum("hjd,hdD->hjD", v, w_o)


def test_weighted_norms_are_alpha_times_the_value_norm_and_split_the_heads_own_output(llama, tok):
    ours, reference = llama
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    out = _own(reference, ids)
    att = attend(ours, TEXT)
    _, cache = run_with_cache(ours, ids, "blocks.1.attn.hook_result")
    for layer in range(len(reference.model.layers)):
        f = _llama_f(reference, out.hidden_states[layer][0], layer)  # (H, n, D)
        alpha = out.attentions[layer][0]  # (H, n, n): transformers' own weights
        expected = torch.linalg.norm(alpha[..., None] * f[:, None], dim=-1)  # ||α_ij f(x_j)||, multiplied out
        D = f.shape[-1]
        assert_float32_close(weighted_value_norms(att, layer), expected, terms=D)
    # Σ_j α_ij f_h(x_j) is head h's own output before the heads are summed (hook_result), so the norms split it
    f = _llama_f(reference, out.hidden_states[1][0], 1)
    summed = torch.einsum("hij,hjD->ihD", out.attentions[1][0], f)
    assert_float32_close(summed, cache["blocks.1.attn.hook_result"][0], terms=f.shape[1])
    weight, norm = first_token_shares(att)
    assert_float32_close(weight, np.stack([a[0, :, :, 0].mean(-1).numpy() for a in out.attentions]), terms=1)
    assert weight.shape == norm.shape and (norm >= 0).all() and (norm <= 1 + 1e-6).all()


def test_a_rows_norms_read_by_one_head_and_by_the_layer_are_the_sums_multiplied_out_by_hand(llama, tok):
    """query_row(measure="norms") and row_contributions: one head's α_ij ||f_h(x_j)|| and the layer's
    ||Σ_h α_ij^h f_h(x_j)||, held to transformers' own weights and modules."""
    ours, reference = llama
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    out = _own(reference, ids)
    att = attend(ours, TEXT)
    layer, head, i = 1, 2, ids.shape[1] - 1
    f = _llama_f(reference, out.hidden_states[layer][0], layer)  # (H, n, D)
    alpha = out.attentions[layer][0]  # (H, n, n)
    D = f.shape[-1]
    one = torch.linalg.norm(alpha[head, i][:, None] * f[head], dim=-1)  # (n,)
    together = torch.linalg.norm(torch.einsum("hj,hjD->jD", alpha[:, i], f), dim=-1)
    assert_float32_close(query_row(att, i, layer=layer, head=head, measure="norms").matrix[0], one, terms=D)
    assert_float32_close(query_row(att, i, layer=layer, measure="norms").matrix[0], together, terms=D * f.shape[0])
    given = row_contributions(att, layer, head, i)
    assert_float32_close(given.weighted, one, terms=D)
    assert_float32_close(given.weights, alpha[head, i], terms=1)
    assert_float32_close(given.value_norms, torch.linalg.norm(f[head], dim=-1), terms=D)
    assert abs(given.shares.sum() - 1) < 1e-9 and given.strongest == int(alpha[head, i].argmax())
    with pytest.raises(ValueError, match="'weights' or 'norms'"):
        query_row(att, i, layer=layer, head=head, measure="alti")


def _alti_by_hand(terms: torch.Tensor) -> torch.Tensor:
    """Ferrando et al. 2022, eq. 5-7: c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised."""
    n = terms.shape[0]
    c = torch.zeros(n, n)
    for i in range(n):
        y = terms[i].sum(0)
        for j in range(n):
            c[i, j] = max(0.0, float(y.abs().sum() - (y - terms[i, j]).abs().sum()))
        c[i] /= c[i].sum()
    return c


def test_alti_on_a_pre_norm_decoder_equals_the_papers_equations_by_hand(llama, tok):
    ours, reference = llama
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    out = _own(reference, ids)
    got = alti(ours, attend(ours, TEXT))
    rolled = torch.eye(ids.shape[1], dtype=torch.float64)
    for layer in range(len(reference.model.layers)):
        x = out.hidden_states[layer][0]
        f = _llama_f(reference, x, layer)
        terms = torch.einsum("hij,hjD->ijD", out.attentions[layer][0], f)  # T_i(x_j) without the residual ...
        terms[range(len(x)), range(len(x))] += x  # ... and with it: token i keeps x_i
        expected = _alti_by_hand(terms)
        np.testing.assert_allclose(got.layers[layer], expected.numpy(), atol=1e-4)
        assert_float32_close(got.norms[layer], torch.linalg.norm(terms, dim=-1), terms=x.shape[-1])  # ATB + RES
        rolled = expected.double() @ rolled
        np.testing.assert_allclose(got.rolled[layer], rolled.numpy(), atol=1e-4)
    assert np.allclose(got.layers.sum(-1), 1) and np.all(np.triu(got.layers[0], 1) == 0)  # causal: no later token


def test_alti_on_a_post_norm_encoder_decomposes_its_layernorm_as_the_paper_does(tok):
    ours, reference = build("bert", tok)
    ids = torch.tensor(tok(TEXT)["input_ids"])[None]
    out = _own(reference, ids)
    got = alti(ours, attend(ours, TEXT))
    config = reference.config
    H, D = config.num_attention_heads, config.hidden_size
    d = D // H
    for layer, block in enumerate(reference.base_model.encoder.layer):
        x = out.hidden_states[layer][0]
        with torch.no_grad():
            v = block.attention.self.value(x).reshape(-1, H, d).transpose(0, 1)  # (H, n, d)
            w_o = block.attention.output.dense.weight.T.reshape(H, d, D)
            terms = torch.einsum("hij,hjD->ijD", out.attentions[layer][0], torch.einsum("hjd,hdD->hjD", v, w_o))
            terms[range(len(x)), range(len(x))] += x
            norm, bias = block.attention.output.LayerNorm, block.attention.output.dense.bias
            sigma = torch.sqrt((terms.sum(1) + bias).var(-1, unbiased=False) + norm.eps)
            terms = norm.weight * (terms - terms.mean(-1, keepdim=True)) / sigma[:, None, None]
        np.testing.assert_allclose(got.layers[layer], _alti_by_hand(terms).numpy(), atol=1e-4)
        assert_float32_close(got.norms[layer], torch.linalg.norm(terms, dim=-1), terms=D)  # ATB + RES + LN


def test_a_family_that_normalises_attentions_output_is_refused_with_the_reason(tok):
    ours, _ = build("gemma3", tok)
    with pytest.raises(ValueError, match="normalises attention's output before the residual"):
        alti(ours, attend(ours, TEXT))


KOBAYASHI_TEXTS = ("I sat on the river bank and watched the water.",
                   "The animal didn't cross the street because it was too tired.",
                   "She deposited the money at the bank before noon.")


def test_minilms_cls_and_sep_get_large_weights_and_small_norms_as_kobayashi_found_in_bert(minilm):
    """Kobayashi et al. 2020, figure 3 (BERT): [CLS] and [SEP] get much weight and hand over little. In MiniLM, on
    three sentences: every head's share of weighted norm on them below its share of weight (measured: 216 of 216
    heads; mean weight share 0.52, norm share 0.16; docs/contributions.md)."""
    from attention.models import head_shares

    weight, norm = [], []
    for text in KOBAYASHI_TEXTS:
        att = attend(minilm, text)
        for layer in range(att.n_layers):
            for head in range(att.n_heads):
                w, n = head_shares(att, layer, head, np.asarray(att.special))
                weight.append(w)
                norm.append(n)
    weight, norm = np.array(weight), np.array(norm)
    assert (norm < weight).mean() >= 0.95 and norm.mean() < 0.5 * weight.mean()


def test_model_heads_shows_alti_for_the_zooms_layer_only_when_asked(minilm):
    """The page's ALTI section: closed, nothing is computed; open, the zoom's layer of alti() composed through the
    layers (rows summing to 1), and this layer alone when the toggle is off."""
    from attention.models import alti
    from tests.test_pages import canvas, open_page

    at = open_page("pages/model_heads.py")  # MiniLM on the page's example
    assert not [t for t in at.toggle if t.key == "heads.alti_rolled"]  # closed: not computed, nothing drawn
    at.session_state["heads.alti"] = True  # the reader opens the expander
    at.run()
    assert not at.exception
    shown = canvas(at, "heads.alti_map")
    found = alti(minilm, attend(minilm, next(t.value for t in at.text_area if t.label == "Sentence")))
    D = minilm.network.config.hidden_size  # each contribution sums over D dimensions (float32 rounding of a run)
    assert_float32_close(shown.values, found.rolled[0], terms=D)  # layer 1, the page's default
    np.testing.assert_allclose(shown.values.sum(-1), 1, atol=1e-5)
    at.toggle(key="heads.alti_rolled").set_value(False).run()
    assert_float32_close(canvas(at, "heads.alti_map").values, found.layers[0], terms=D)
