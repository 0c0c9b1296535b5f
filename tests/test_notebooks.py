"""Notebooks: any model's own attentions in, every figure out, BertViz's names, and results that travel."""

import io
import pickle
import re

import numpy as np
import pytest
import torch

from attention import figures
from attention.models import Reading, attend
from attention.models.recorded.export import NPZ_MAX_WEIGHTS
from attention.models.recorded.imported import export_npz, from_attentions, load_npz
from tests.numerics import assert_float32_close
from tests.tiny_models import build

TEXT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def bert(tok):
    return build("bert", tok)[1]


def own(model, ids, **kw):
    with torch.no_grad():
        return model(input_ids=ids, output_attentions=True, **kw).attentions


def test_from_attentions_keeps_the_models_own_weights_and_every_figure_builds(bert, tok):
    enc = tok(TEXT, return_tensors="pt")
    attentions = own(bert, enc["input_ids"])
    att = from_attentions(tok.convert_ids_to_tokens(enc["input_ids"][0]), attentions, model_name="tiny bert")
    for layer, a in enumerate(attentions):
        np.testing.assert_array_equal(att.weights[layer], a[0].numpy())  # exactly: the same numbers
    assert att.tokens[0] == "[CLS]" and att.special[0] and att.architecture == "encoder-only"
    for fig in (figures.grid(att), figures.head(att, 1, 2), figures.head(att, 0, how="mean"),
                figures.head(att, 1, 0, reading=Reading(without_sinks=True)), figures.token(att, 3),
                figures.lines(att, 0, [0, 1]), figures.statistic(att, "entropy"), figures.distance(att, 1, 3)):
        assert fig.data and fig.to_json()
    with pytest.raises(ValueError, match="not captured"):
        att.head_trace(0, 0)  # weights given, not q and k
    from attention import scaled_dot_product_attention
    from attention.toy import examples as ex

    toy = scaled_dot_product_attention(ex.FRUIT_QUERY[None, :], ex.FRUIT_KEYS, ex.FRUIT_VALUES)
    steps = figures.trace_steps(toy, ["query"], ["apple", "banana", "chair"])
    np.testing.assert_allclose(np.asarray(steps.data[1].z, float), toy.weights)


@pytest.mark.numeric
def test_a_padded_batch_drops_its_padding(bert, tok):
    batch = tok([TEXT, "A short one"], return_tensors="pt", padding=True)
    attentions = own(bert, batch["input_ids"], attention_mask=batch["attention_mask"])
    tokens = [tok.convert_ids_to_tokens(row) for row in batch["input_ids"]]
    short = from_attentions(tokens, attentions, attention_mask=batch["attention_mask"], batch_index=1)
    alone = tok("A short one", return_tensors="pt")["input_ids"]
    assert short.tokens == tuple(tok.convert_ids_to_tokens(alone[0]))  # no [PAD] left
    for layer, a in enumerate(own(bert, alone)):
        # a padded batch runs other kernels than one text: sums over the model's width in other orders
        assert_float32_close(short.weights[layer], a[0].numpy(), terms=bert.config.hidden_size, magnitude=1.0)


def test_bertviz_calls_work_unchanged_and_return_html_without_the_network(bert, tok):
    enc = tok(TEXT, return_tensors="pt")
    attention, tokens = own(bert, enc["input_ids"]), tok.convert_ids_to_tokens(enc["input_ids"][0])
    assert figures.head_view(attention, tokens, layer=1, heads=[0, 2]).data
    assert figures.model_view(attention, tokens, include_layers=[1], include_heads=[0, 1, 3]).data
    html = figures.head_view(attention=attention, tokens=tokens, sentence_b_start=4, html_action="return").data
    assert "<html" in html and "Plotly.newPlot" in html and not re.search(r"<script[^>]*\bsrc=", html)  # inline
    page = figures.model_view(attention, tokens, display_mode="light", html_action="return")
    assert not re.search(r"<script[^>]*\bsrc=", page.data) and page._repr_html_() == page.data


def test_an_exported_result_opens_again_with_weights_or_with_q_and_k(tok, monkeypatch):
    loaded, _ = build("llama", tok)
    att = attend(loaded, TEXT)
    back = load_npz(export_npz(att))
    np.testing.assert_allclose(back.weights, att.weights, atol=1e-7)
    assert back.tokens == att.tokens and back.architecture == "decoder-only"
    monkeypatch.setattr("attention.models.recorded.export.NPZ_MAX_WEIGHTS", 10)  # as a long input is written: q, k, v
    long = load_npz(export_npz(att))
    assert long.self_attn.captured and NPZ_MAX_WEIGHTS > 10
    np.testing.assert_allclose(long.weights, att.weights, atol=1e-6)
    np.testing.assert_allclose(long.head_trace(1, 2).weights, att.head_trace(1, 2).weights, atol=1e-6)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_a_wrong_truncated_or_hostile_file_gets_a_message(tok):
    loaded, _ = build("gpt2", tok)
    good = export_npz(attend(loaded, TEXT))
    with np.load(io.BytesIO(good)) as npz:
        fields = {k: npz[k] for k in npz.files}
    cases = {
        "pickled object": (_npz(**fields, evil=np.array([pickle.loads(pickle.dumps({"x": 1}))], dtype=object)),
                           "Python objects"),
        "truncated": (good[:len(good) // 2], "not a readable"),
        "not an npz": (b"<html>hello</html>", "not an .npz"),
        "wrong shapes": (_npz(**{**fields, "self_weights": fields["self_weights"][:, :, :3]}), "positions"),
        "NaN": (_npz(**{**fields, "self_weights": np.full_like(fields["self_weights"], np.nan)}), "NaN"),
        "no tokens": (_npz(**{k: v for k, v in fields.items() if k != "tokens"}), "no tokens"),
    }
    for name, (data, message) in cases.items():
        with pytest.raises(ValueError, match=message):
            load_npz(data)
        assert name
    with pytest.raises(ValueError, match="up to 0 MB"):
        load_npz(good, max_bytes=100)  # the size limit, tried with a small one


def test_an_encoder_decoders_three_attentions_come_in_with_bertviz_names(tok):
    _, bart = build("bart", tok)
    source = tok("The cat sat on the mat", return_tensors="pt")["input_ids"]
    target = torch.tensor([[0, 5, 6, 7]])
    with torch.no_grad():
        out = bart(input_ids=source, decoder_input_ids=target, output_attentions=True)
    tokens = tok.convert_ids_to_tokens(source[0])
    att = from_attentions(tokens, out.encoder_attentions, decoder_tokens=["<s>", "a", "b", "c"],
                          decoder_attentions=out.decoder_attentions, cross_attentions=out.cross_attentions)
    assert att.architecture == "encoder-decoder" and att.cross_attn.own_weights.shape[2:] == (4, len(tokens))
    np.testing.assert_array_equal(att.attention_stack("cross").own_weights[1], out.cross_attentions[1][0].numpy())
    assert figures.head(att, 1, 2).data  # the encoder's self-attention
    view = figures.head_view(encoder_attention=out.encoder_attentions, decoder_attention=out.decoder_attentions,
                             cross_attention=out.cross_attentions, encoder_tokens=tokens,
                             decoder_tokens=["<s>", "a", "b", "c"], html_action="return")
    assert "Plotly.newPlot" in view.data
