"""What a researcher's walk through Compare two models, A head across a corpus and Inside one head found (issue
59): token labels that hid a leading space, a corpus context that cut off its query and split words, a
comparison of heads that do not correspond, a wall of terms, and a page of the path that asked nothing. (The
unreadable "why this key" at 800 px is held by tests/test_charts.py, which reads that view among every chart.)"""

import re

import numpy as np
import pytest

from attention.focus import VISIBLE_SPACE
from tests.test_pages import chart, open_page

TEXT = "the bank, the bank. The end"  # "the" starts the text, " the" follows a space: two tokens in SmolLM2


def _by_tokenizer(loaded, att) -> list[str]:
    """The labels a token deserves, from the tokenizer's own pieces: a byte-level piece that begins with "Ġ" (a
    space) or a SentencePiece one with "▁" gets the mark; every other token is shown as the app shows tokens."""
    pieces = loaded.tokenizer.convert_ids_to_tokens([int(i) for i in att.token_ids])
    return [VISIBLE_SPACE + t if p[:1] in ("Ġ", "▁") and not att.special[i] else t
            for i, (p, t) in enumerate(zip(pieces, att.tokens, strict=True))]


def test_two_tokens_never_look_alike_on_any_view(smollm2, minilm):
    """Every view a page draws labels " bank" as ␣bank and "bank" as bank, as the tokenizer's own pieces say; two
    labels are equal only for the same token. A WordPiece model (MiniLM) has no spaces in its tokens: no mark."""
    from attention.models import (
        attend,
        compare_results,
        head_pair,
        line_view,
        query_row,
        shown_tokens,
        token_focus,
        zoom,
    )

    att = attend(smollm2, TEXT)
    expected = _by_tokenizer(smollm2, att)
    assert expected[0] == "the" and expected[3] == f"{VISIBLE_SPACE}the"  # the text's own case: both there
    view = zoom(att, "head", layer=0, head=0)
    assert list(view.col_labels) == list(view.row_labels) == expected
    assert list(query_row(att, 2, layer=0, head=0).col_labels) == expected
    assert list(token_focus(att, 2).col_labels) == expected
    assert list(line_view(att, 0, [0]).labels) == expected
    assert list(head_pair(att, att, compare_results(att, att), 0, 0).a.col_labels) == expected
    labels, ids = shown_tokens(att), [int(i) for i in att.token_ids]
    assert all(ids[i] == ids[j] for i in range(len(ids)) for j in range(len(ids)) if labels[i] == labels[j])
    bert = attend(minilm, TEXT)
    assert list(zoom(bert, "head", layer=0, head=0).col_labels) == list(bert.tokens)


def test_the_token_pickers_show_the_mark_and_the_glossary_says_what_it_is(smollm2):
    """The token picker every model page shares, on Inside one head and Model heads: its options are the marked
    labels, and its help is the glossary's definition of the mark, written there once."""
    from attention.glossary import definition
    from attention.models import attend

    expected = _by_tokenizer(smollm2, attend(smollm2, TEXT))
    for page, slot in (("inside_head", "inside"), ("model_heads", "heads")):
        at = open_page(f"pages/{page}.py")
        at.text_area(key=f"{slot}.text").set_value(TEXT).run()
        at.selectbox(key=f"{slot}.model").set_value("smollm2").run()
        assert not at.exception, at.exception
        picker = next(s for s in at.selectbox if s.label in ("Token", "Query token"))
        assert picker.options == [f"{i}: {label}" for i, label in enumerate(expected)], page
        assert definition(VISIBLE_SPACE) in picker.proto.help and "two different tokens" in definition(VISIBLE_SPACE)


# --- A head across a corpus: each top example's context --------------------------------------------------------
LONG = ("I put the saddle on the horse before the long ride, and when we came back from the hills the old groom "
        "took the saddles off every horse in the yard and hung them up to dry beside the stable door again.")


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_a_top_examples_context_is_its_text_with_the_query_marked_near_the_start(name, request):
    """Each row of every head's top examples: its context reads as the text the tokenizer decoded (pieces of a
    word joined, no space before a comma; the text itself, lower-cased for an uncased tokenizer), the query's
    token is in it between « », the key's between [ ], the query within the first 60 characters a table cell
    shows; the query and key columns are the tokens as every page labels them."""
    from attention.figures import example_rows
    from attention.models import corpus_survey

    loaded = request.getfixturevalue(name)
    texts = [LONG, "The bank of the river. The bank raised its rates!"]
    found = corpus_survey(loaded, texts, k=8, sample=10)
    uncased = bool(getattr(loaded.tokenizer, "do_lower_case", False))
    for layer in range(found.n_layers):
        for head in range(found.n_heads):
            for row, example in zip(example_rows(found, layer, head), found.top_examples(layer, head), strict=True):
                line, text = row["in context («query», [key])"], texts[example.text_index]
                reference = text.lower() if uncased else text
                token = found.tokens[example.text_index][example.query]
                assert re.search(r"«\[?" + re.escape(token) + r"\]?»", line), line
                assert line.index("«") < 60, line
                plain = re.sub(r"[«»\[\]]", "", re.sub(r"\[(CLS|SEP)\]", "", line))
                for part in plain.split("…"):
                    assert part.strip() in reference, (part, reference)
                    part = part.strip()  # whole words at both ends ("thunder", not "under")
                    at, end = reference.index(part), reference.index(part) + len(part)
                    assert not part[0].isalnum() or at == 0 or not reference[at - 1].isalnum(), (part, reference)
                    assert not part[-1].isalnum() or end == len(reference) or not reference[end].isalnum(), part
                ids = loaded.tokenizer(text)["input_ids"]
                att_labels = [VISIBLE_SPACE + t if p.startswith(("Ġ", "▁")) else t for p, t in zip(
                    loaded.tokenizer.convert_ids_to_tokens(ids), found.tokens[example.text_index], strict=False)]
                assert (row["query"], row["key"]) == (att_labels[example.query], att_labels[example.key])
    assert "saddles" in "".join(found.pieces(0)) and " s addle" not in "".join(found.pieces(0))


# --- Compare two models: heads that do not correspond ----------------------------------------------------------
def test_each_models_own_strongest_heads_are_its_largest_values():
    from attention.models import own_strongest

    rng = np.random.default_rng(0)
    a, b = rng.random((30, 9)), rng.normal(size=(18, 4))
    own = own_strongest(a, b, 3, signed=True)
    by_hand_a = sorted(((float(a[i, j]), i, j) for i in range(30) for j in range(9)), reverse=True)[:3]
    by_hand_b = sorted(((abs(float(b[i, j])), i, j) for i in range(18) for j in range(4)), reverse=True)[:3]
    assert [(i, j) for i, j, _ in own.a] == [(i, j) for _, i, j in by_hand_a]
    assert [(i, j, v) for i, j, v in own.b] == [(i, j, float(b[i, j])) for _, i, j in by_hand_b]
    assert own.rows()[0]["head of A"] == f"L{by_hand_a[0][1] + 1}H{by_hand_a[0][2] + 1}"


def test_two_models_of_other_shapes_show_each_ones_own_strongest_role_heads(tmp_path, monkeypatch, tok):
    """Two models whose heads do not correspond (2 x 4 and 3 x 2 heads): Head roles shows each model's own
    strongest heads from its own run of the probe, side by side, and no head-by-head B − A; one model in two
    precisions keeps the head-by-head comparison."""
    from attention.models import head_roles, load_model
    from tests.tiny_models import saved

    saved("llama", tmp_path / "tiny" / "a", tok)
    saved("llama", tmp_path / "tiny" / "b", tok, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1)
    monkeypatch.setenv("ATTENTION_EXPLORER_MODEL_DIRS", str(tmp_path / "tiny"))
    at = open_page("pages/compare.py")
    at.selectbox(key="cmp.a.model").set_value("local:tiny/a").run()
    at.selectbox(key="cmp.b.model").set_value("local:tiny/b").run()
    at.button_group(key="cmp.measure").set_value("roles").run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "head of B" in d.value.columns)
    for side, name in (("A", "local:tiny/a"), ("B", "local:tiny/b")):
        scores = head_roles(load_model(name)).induction
        order = np.argsort(-scores, axis=None, kind="stable")[:len(table)]
        heads = [f"L{i + 1}H{j + 1}" for i, j in zip(*np.unravel_index(order, scores.shape), strict=True)]
        assert table[f"head of {side}"].tolist() == heads
        np.testing.assert_allclose(table[f"{side}'s value"], scores.ravel()[order], atol=1e-5)
    assert not any("measure_map" in c.proto.id for c in at.get("plotly_chart"))  # no B − A of unrelated heads
    at.selectbox(key="cmp.b.model").set_value("local:tiny/a").run()
    at.selectbox(key="cmp.b.precision").set_value("bfloat16").run()
    assert not at.exception and chart(at, "cmp.measure_map")  # the same heads: B − A, head by head


# --- Inside one head ------------------------------------------------------------------------------------------
def _own_weights(loaded, text: str, layer: int, head: int) -> tuple[np.ndarray, list[int]]:
    """The model's own eager attention row of the last token (its output_attentions, from its own folder: no
    code of ours), and the text's token ids."""
    import torch
    import transformers as tf

    network = tf.AutoModel.from_pretrained(loaded.network.config._name_or_path, attn_implementation="eager")
    enc = loaded.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = network(**enc, output_attentions=True)
    return out.attentions[layer][0, head, -1].double().numpy(), enc["input_ids"][0].tolist()


def test_inside_one_head_asks_on_its_own_model_and_never_switches_it_silently(minilm, smollm2):
    """The page opens on MiniLM: its question, about SmolLM2, is asked and judged on SmolLM2 beside the page, whose
    model stays; its answer is the head's own largest weight."""
    from attention.models.recorded.questions import REPEATED, model_questions_for

    q = model_questions_for("inside_head")[0]  # the induction head's; the second (a sink's weight) is MiniLM's
    at = open_page("pages/inside_head.py", questions=True)
    assert at.selectbox(key="inside.model").value == "minilm"
    assert any(r.label == "Your prediction" for r in at.radio)
    assert at.get("plotly_chart")  # the page's own example is not the question's: nothing of it waits
    row, ids = _own_weights(smollm2, REPEATED, 18, 6)
    best = int(np.argmax(row))
    expected = smollm2.tokenizer.decode([ids[best]])
    wrong = next(c for c in q.choices if c != expected)
    at.radio(key=f"lesson.choice.{q.key}").set_value(wrong)
    next(b for b in at.button if str(b.key).startswith(f"FormSubmitter:lesson.form.{q.key}-")).click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="inside.model").value == "minilm"  # never switched
    said = " ".join(m.value for m in (*at.info, *at.success)).replace("\\", "")
    assert f"looks at “{expected.replace(' ', VISIBLE_SPACE)}” most" in said, said
    assert f"{row[best]:.2f}" in said
    at.button(key=f"lesson.state.{q.key}").click().run()  # "Show this on the page": SmolLM2, asked for
    assert at.selectbox(key="inside.model").value == "smollm2" and not at.exception


def test_why_this_key_says_each_term_plainly_and_names_quantities_as_the_toy_pages(smollm2):
    """Section "why this key": every term it uses is the glossary's, explained on hover; the score is q·k and
    the scaled score is what softmax reads, as on Step by step; no unexplained shorthand."""
    from attention.glossary import definition

    assert "√d_k" not in definition("score") and "√d_k" in definition("scaled score")
    at = open_page("pages/inside_head.py")
    at.selectbox(key="inside.model").set_value("smollm2").run()
    at.session_state["inside.why"] = True  # "Why this key" opened
    at.run()
    assert not at.exception, at.exception
    prose = " ".join(m.value for m in at.markdown)
    for term in ("residual stream", "MLP", "layer norm", "scaled score", "previous-token head", "induction head"):
        assert re.search(r'<abbr title="' + re.escape(definition(term)[:30]), prose.replace("&#x27;", "'")), term
    shown = " ".join([*prose.split(), *(c.value for c in at.caption)])
    for shorthand in ("frozen", "Olsson et al.", "bias terms"):
        assert shorthand not in shown, shorthand
    table = next(d.value for d in at.dataframe if "scaled score" in d.value.columns)
    assert list(table.columns[:4]) == ["key", "score q·k", "scaled score", "softmax weight"]
    assert {m.label for m in at.metric} >= {"Model's scaled score", "Constant terms"}
