"""Words not pieces, sinks, lines and export: checked against independent computations."""

import csv
import io
import types

import numpy as np
import pytest

from attention.models import attend
from attention.models.forward.tokens import encoding_words
from attention.models.recorded.words import word_groups, word_level
from tests.numerics import assert_float32_close

pytestmark = pytest.mark.slow

SPLIT = "The unbelievably tired cat sat on the riverbank."


def reference_pieces(tokenizer, text: str, offsets, special) -> list[list[int]]:
    """Independent grouping: the tokenizer's pre-tokens (its own word boundaries, with their character
    spans), and each token put in the pre-token whose span holds its characters."""
    spans = [span for _, span in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(text)]
    groups, last = [], None
    for i, ((start, end), sp) in enumerate(zip(offsets.tolist(), special, strict=True)):
        owner = None if sp else next(k for k, (a, b) in enumerate(spans) if a <= start and end <= b)
        if owner is not None and owner == last:
            groups[-1].append(i)
        else:
            groups.append([i])
        last = owner
    return groups


@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_word_groups_follow_the_tokenizers_own_words(model, minilm, smollm2):
    loaded = {"minilm": minilm, "smollm2": smollm2}[model]
    att = attend(loaded, SPLIT)
    groups = word_groups(att)
    assert [list(p) for p in groups.pieces] == reference_pieces(loaded.tokenizer, att.text, att.offsets, att.special)
    assert "unbelievably" in groups.words and "riverbank" in groups.words
    assert len(groups.pieces[groups.words.index("unbelievably")]) > 1  # it was split into pieces


def test_cjk_and_emoji_become_the_words_each_tokenizer_makes(minilm, smollm2):
    text = "I love 東京 👍🏽 a lot"
    bert = word_groups(attend(minilm, text))
    assert ["東", "京"] == [w for w in bert.words if w in "東京"]  # BERT splits every CJK character
    assert "👍🏽" in bert.words  # one [UNK], labelled by its own text
    smol = word_groups(attend(smollm2, text))
    assert "東京" in smol.words and "👍🏽" in smol.words
    assert len(smol.pieces[smol.words.index("👍🏽")]) > 1  # byte-level pieces, shown as "�" one by one


def test_sentencepiece_words_from_a_tiny_tokenizer():
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import PreTrainedTokenizerFast

    corpus = ["the cat sat on the mat", "unbelievable things happen", "a dog ran far", "believe it"] * 20
    sp = SentencePieceUnigramTokenizer()
    sp.train_from_iterator(corpus, vocab_size=40, show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=sp)
    text = "unbelievable cats"
    enc = tok(text, return_offsets_mapping=True, return_tensors="np")
    word_ids, offsets = encoding_words(enc, enc["input_ids"].shape[1])
    n = len(word_ids)
    fake = types.SimpleNamespace(word_ids=word_ids, offsets=offsets, special=np.zeros(n, bool), text=text,
                                 tokens=tuple(tok.convert_ids_to_tokens(enc["input_ids"][0])), model_name="tiny")
    groups = word_groups(fake)
    assert groups.words == ("unbelievable", "cats") and groups.n_pieces == n > 2


@pytest.mark.numeric
def test_word_level_sums_to_and_averages_from_pieces(minilm):
    att = attend(minilm, SPLIT)
    wa = word_level(att)
    w = att.weights  # (L, H, n, n) the model's tokens
    for a, rows in enumerate(wa.pieces):
        for b, cols in enumerate(wa.pieces):
            expected = np.mean([sum(w[..., i, j] for j in cols) for i in rows], axis=0)
            assert_float32_close(wa.weights[..., a, b], expected, terms=len(cols), magnitude=1.0)
    np.testing.assert_allclose(wa.weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.numeric
def test_sinks_of_smollm2_start_with_the_first_token_and_removing_them_renormalises(smollm2):
    from attention.models.forward.survey_pass import survey
    from attention.models.recorded.views import Reading, query_row, zoom

    att = attend(smollm2, "When Mary and John went to the store, John gave a drink to")
    counted = att.head_sinks(3, 4)  # counted by the stack itself, before any survey
    found = survey(att)
    assert found.sinks[..., 0].all()  # the first token is every head's sink
    assert np.median(found.sink_mass) > 0.5  # and takes most of the attention (Xiao et al. 2023)
    own_count = np.mean([att.head_weights(3, 4)[:, j] > 0.5 for j in range(len(att.tokens))], axis=1)
    np.testing.assert_array_equal(counted, found.sinks[3, 4])
    assert set(np.nonzero(own_count > 0.5)[0]) <= set(np.nonzero(counted)[0])
    view = zoom(att, "head", layer=3, head=4, reading=Reading(without_sinks=True))
    rows = view.matrix[1:]  # row 0 sees only the first token, itself a sink
    np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)
    assert np.all(view.matrix[:, counted] == 0)
    assert view.sinks == tuple(att.tokens[j] for j in np.nonzero(counted)[0])
    row = query_row(att, len(att.tokens) - 1, layer=3, head=4, reading=Reading(without_sinks=True))
    keep = ~counted
    own = att.head_weights(3, 4)[-1]
    assert_float32_close(row.matrix[0][keep], own[keep] / own[keep].sum(), terms=len(own), magnitude=1.0)


def test_npz_round_trips_and_csv_has_one_row_per_query(minilm):
    from attention.models.recorded.export import file_stem, matrix_csv, sentence_npz
    from attention.models.recorded.views import zoom

    att = attend(minilm, SPLIT)
    with np.load(io.BytesIO(sentence_npz(att))) as data:  # numpy alone, no pickle
        np.testing.assert_array_equal(data["self_weights"], att.weights)
        assert tuple(data["tokens"]) == att.tokens and str(data["text"]) == att.text
        np.testing.assert_array_equal(data["token_ids"], att.token_ids)
        assert str(data["model_name"]) == att.model_name
    view = zoom(att, "head", layer=2, head=3)
    rows = list(csv.reader(io.StringIO(matrix_csv(view))))
    assert len(rows) == 1 + len(att.tokens) and rows[0][1:] == list(att.tokens)
    assert [float(x) for x in rows[5][1:]] == pytest.approx(view.matrix[4].tolist(), abs=1e-6)
    assert file_stem("org/../../etc", "layer 3", "<img src=x>") == "org-etc_layer-3_img-src-x"


def test_the_token_followed_first_is_bank_else_the_last_word():
    from attention.models import default_focus

    tokens = ("[CLS]", "i", "sat", "on", "the", "river", "bank", ".", "[SEP]")
    special = (True, False, False, False, False, False, False, False, True)
    assert default_focus(tokens, special=special) == 6  # the seeds' "bank"
    plain = ("[CLS]", "the", "otter", "dove", "in", ".", "[SEP]")
    assert default_focus(plain, special=(True, *[False] * 5, True)) == 4  # "in": not [SEP], not "."
    assert default_focus(("The", "cat", "sat", "!"), special=(False,) * 4) == 2  # a decoder's: not token 0
    assert default_focus(plain) == 0  # without the special flags, as before
    pasted = ("The", "cat", "sat", ".", "␣", "⏎⏎")  # a pasted text ending in a space and blank lines
    assert default_focus(pasted, special=(False,) * 6) == 2
