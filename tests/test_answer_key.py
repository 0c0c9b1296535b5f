"""The answer key (attention.answer_key): every answer as its page computes it and as worked out here on its
own, a belief for every choice that is not the answer, and a handout that hides what it should.

The toy answers are worked out by hand in numpy from the examples' numbers; the model answers from the model's
own logits and eager attention (the loaded network run outside a recording runs transformers' own eager
kernel: attention.models.forward.capture), not through our capture and rebuilt weights.
"""

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from markdown_it import MarkdownIt

from attention.answer_key import answer_key, key_markdown, shown_choice
from attention.models.recorded.questions import model_questions_for
from attention.toy import answers as toy_answers
from attention.toy import examples as ex
from attention.toy import questions as toy_questions
from attention.toy import reveal

# every page that asks a model question, in the questions' order: a new one is in the key without an edit here
MODEL_PAGES = tuple(dict.fromkeys(q.page for q in model_questions_for()))
WRITTEN_FOR = {  # the answers the misconceptions were written against: a change here means reading them again
    "lookup.winner": "chair", "lookup.scaling": "grows", "self.thinking": "Thinking", "self.sum": "1",
    "scaling.unscaled": "it approaches 1", "scaling.scaled": "no", "scoring.flattest": "scaled_dot",
    "scoring.first": "1", "mh.causal": "0", "mh.sharp": "cat", "toy.bank": "nature", "toy.it": "street",
    "pos.without": "no", "pos.with": "yes", "bn.long": "almost none",
    "heads.river": "[CLS]", "amb.it_sink": "[CLS]", "amb.it_noun": "tired", "pred.paris": " Paris",
    "circ.writers": "the heads", "inside.induction": " bank", "inside.parked": "under a fifth",
}


@pytest.fixture(scope="module")
def toy_key():
    return answer_key(with_models=False)


def _softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def _by_hand(key: str, state: dict) -> str:
    """A toy answer from the examples' numbers, softmax written out here."""
    if key in ("lookup.winner", "lookup.scaling"):
        query = np.array([state[k] for k in toy_answers.FRUIT_QUERY_KEYS])
        scores = ex.FRUIT_KEYS @ query  # (3,)
        scaled, plain = _softmax(scores / np.sqrt(len(query))), _softmax(scores)
        if key == "lookup.winner":
            return ex.FRUIT_LABELS[int(np.argmax(scaled if state["lookup.scaled"] else plain))]
        return "grows" if plain.max() > scaled.max() else "shrinks"
    if key in ("self.thinking", "self.sum"):
        data = ex.thinking_machines()
        q, k = data.x @ data.w_q, data.x @ data.w_k  # (2, 64) each
        scores = q[state["self.query"]] @ k.T
        assert np.allclose(scores, (112, 96))  # the numbers the question says
        weights = _softmax(scores / np.sqrt(q.shape[1]))
        return data.tokens[int(np.argmax(weights))] if key == "self.thinking" else f"{weights.sum():.0f}"
    if key == "mh.sharp":
        s = state["mh.sharp"]
        english = np.array([ex.TRANSLATION_SOURCE[w] for w in ex.SOURCE_SENTENCE], dtype=float)  # (6, 6)
        chat = np.array(ex.TRANSLATION_TARGET["chat"], dtype=float)  # (6,)
        weights = _softmax((s * chat) @ (s * english).T / np.sqrt(english.shape[1]))
        return ex.SOURCE_SENTENCE[int(np.argmax(weights))]
    raise KeyError(key)


def test_every_toy_answer_is_the_pages_own_and_the_one_worked_out_by_hand(toy_key):
    questions = {q.key: q for q in toy_questions.QUESTIONS}
    assert [e.key for e in toy_key] == list(questions)  # every toy question, in the pages' order
    for e in toy_key:
        q = questions[e.key]
        reveal = q.reveal()
        assert (e.page, e.ask, e.choices) == (q.page, q.ask, q.choices)
        assert (e.answer, e.said, e.numbers, e.why) == (reveal.answer, reveal.said, reveal.numbers, reveal.why)
        assert e.answer == WRITTEN_FOR[e.key], (e.key, "the answer changed: read its misconceptions again")
    by_hand = ("lookup.winner", "lookup.scaling", "self.thinking", "self.sum", "mh.sharp")
    for key in by_hand:
        assert next(e for e in toy_key if e.key == key).answer == _by_hand(key, dict(questions[key].state)), key


def _every_other_choice_has_a_belief(entries) -> None:
    for e in entries:
        assert [c for c, _ in e.misconceptions] == [c for c in e.choices if c != e.answer], e.key
        for choice, belief in e.misconceptions:
            assert belief.strip() and belief.startswith("believes "), (e.key, choice)


def test_every_choice_but_the_answer_comes_with_a_belief(toy_key):
    toy_questions.check_answers()  # one misconception per choice, the answer's too
    from attention.models.recorded.questions import check_misconceptions

    check_misconceptions()
    _every_other_choice_has_a_belief(toy_key)


def test_a_question_missing_a_belief_or_holding_a_stray_one_is_named():
    q = toy_questions.QUESTIONS[0]
    missing = replace(q, misconceptions=q.misconceptions[1:])
    with pytest.raises(ValueError, match=f"{q.key}: 0 misconceptions for the choice '{q.choices[0]}'"):
        reveal.check_misconceptions_of(missing.key, missing.choices, missing.misconceptions)
    with pytest.raises(ValueError, match="not among its choices"):
        reveal.check_misconceptions_of(q.key, q.choices, (*q.misconceptions, ("pear", "believes pears")))
    with pytest.raises(ValueError, match="2 misconceptions"):
        reveal.check_misconceptions_of(q.key, q.choices, (*q.misconceptions, q.misconceptions[0]))
    with pytest.raises(ValueError, match="pear"):
        q.misconception("pear")
    assert q.misconception(q.choices[0]) == q.misconceptions[0][1]


def test_pages_come_in_the_order_given_and_a_page_that_asks_nothing_adds_nothing():
    entries = answer_key(["scaling", "compare", "lookup", "model_heads"], with_models=False)
    assert [e.key for e in entries] == ["scaling.unscaled", "scaling.scaled", "lookup.winner", "lookup.scaling"]


def test_the_toy_key_needs_neither_torch_nor_streamlit():
    code = ("import sys; from attention.answer_key import answer_key, key_markdown; "
            "key_markdown(answer_key(['lookup', 'bottleneck']), answers=True); "
            "print(sorted({'torch', 'transformers', 'streamlit'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def _items(markdown: str) -> list[tuple[int, str]]:
    """The handout's structure as a Markdown parser reads it: (level, what) for each heading and numbered item."""
    found, tokens = [], MarkdownIt("commonmark").parse(markdown)
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            found.append((int(t.tag[1]), tokens[i + 1].content))
        elif t.type == "ordered_list_open":
            found.append((0, t.attrGet("start") or "1"))
        elif t.type == "list_item_open" and t.level == 1:
            found.append((-1, tokens[i + 2].content))  # the item's first paragraph: its question
    return found


def _handouts_hide_and_show_what_they_should(entries, titles=None) -> None:
    hidden, shown = (key_markdown(entries, answers=a, titles=titles) for a in (False, True))
    assert "Answer:" not in hidden and "If they chose" not in hidden
    for e in entries:
        assert all(belief not in hidden for _, belief in e.misconceptions), e.key
        assert e.why not in hidden and e.numbers not in hidden, e.key
        assert f"**Answer:** {shown_choice(e.answer)}" in shown, e.key
        assert all(f"If they chose {shown_choice(c)}: {belief}" in shown for c, belief in e.misconceptions), e.key
    for markdown in (hidden, shown):  # every question a numbered item, numbered on across the pages' headings
        items = _items(markdown)
        assert [what for level, what in items if level == -1] == [e.ask for e in entries]
        pages = list(dict.fromkeys(e.page for e in entries))
        assert [what for level, what in items if level == 2] == [(titles or {}).get(p, p) for p in pages]
        starts = [int(what) for level, what in items if level == 0]
        assert starts == [1 + next(i for i, e in enumerate(entries) if e.page == p) for p in pages]


def test_the_handout_without_answers_shows_none_and_with_them_shows_each(toy_key):
    _handouts_hide_and_show_what_they_should(toy_key, titles={"lookup": "Lookup: hard vs soft"})


# --- Model questions: from the models ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_key(minilm, smollm2):
    """The model pages' key, from the session's models (each loaded once for every test)."""
    by_name = {"minilm": minilm, "smollm2": smollm2}

    def load(choice):
        assert choice.dtype == "auto", choice  # as the fixtures load them
        return by_name[choice.name]
    return answer_key(MODEL_PAGES, load=load)


def _eager_row(loaded, text: str, layer: int, query: str | int, head: int | None = None):
    """One query's row of the model's own eager attention (a head, or the mean of the layer's heads) and its
    tokens: the network run outside a recording runs transformers' eager kernel."""
    import torch

    enc = loaded.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = loaded.network(**enc, output_attentions=True)
    tokens = loaded.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    heads = out.attentions[layer][0].double().numpy()  # (H, n, n)
    i = tokens.index(query) if isinstance(query, str) else query
    row = heads.mean(axis=0)[i] if head is None else heads[head, i]
    return row, enc["input_ids"][0].tolist(), tokens


@pytest.mark.slow
def test_model_answers_are_the_ones_the_models_give_themselves(model_key, minilm, smollm2):
    import torch

    from attention.models.recorded.questions import OTTER, REPEATED, model_questions_for

    entries = {e.key: e for e in model_key}
    assert list(entries) == [q.key for p in MODEL_PAGES for q in model_questions_for(p)]
    for e in model_key:
        assert e.answer == WRITTEN_FOR[e.key], (e.key, "the answer changed: read its misconceptions again")

    prompt = ex.PREDICTION_EXAMPLES["capital of France"][0]
    enc = smollm2.tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        best = int(smollm2.network(**enc).logits[0, -1].argmax())  # its own logits
    assert entries["pred.paris"].answer == smollm2.tokenizer.decode([best])

    row, _, tokens = _eager_row(minilm, OTTER, 2, "river")
    assert entries["heads.river"].answer == tokens[int(np.argmax(row))]
    row, _, tokens = _eager_row(minilm, ex.IT_SENTENCES[0], 4, "it")
    assert entries["amb.it_sink"].answer == tokens[int(np.argmax(row))]
    row, ids, _ = _eager_row(smollm2, REPEATED, 18, -1, head=6)  # the last "river", L19H7
    assert entries["inside.induction"].answer == smollm2.tokenizer.decode([ids[int(np.argmax(row))]])
    # [CLS]'s share of what L3H8 hands over to "bank": α_j ||v_j W_O^h|| from BERT's own modules, multiplied out
    row, _, tokens = _eager_row(minilm, ex.BANK_SENTENCES[0], 2, "bank", head=7)
    enc = minilm.tokenizer(ex.BANK_SENTENCES[0], return_tensors="pt")
    with torch.no_grad():
        x = minilm.network(**enc, output_hidden_states=True).hidden_states[2][0]  # layer 3's input
        attention = minilm.network.encoder.layer[2].attention
        d = attention.self.attention_head_size
        v = attention.self.value(x)[:, 7 * d:8 * d]  # head 8's values, (n, d)
        f = v @ attention.output.dense.weight[:, 7 * d:8 * d].T  # (n, D): v W_O^h
    handed = row * torch.linalg.norm(f, dim=-1).double().numpy()
    share = handed[int(np.argmax(row))] / handed.sum()
    expected = next(choice for choice, low in (("almost all of it (over 90 %)", 0.9), ("most of it (50-90 %)", 0.5),
                                               ("some (20-50 %)", 0.2), ("under a fifth", 0.0)) if share >= low)
    assert tokens[int(np.argmax(row))] == "[CLS]" and entries["inside.parked"].answer == expected


@pytest.mark.slow
def test_the_model_key_has_a_belief_for_each_other_choice_and_hides_it(model_key, toy_key):
    _every_other_choice_has_a_belief(model_key)
    _handouts_hide_and_show_what_they_should((*toy_key, *model_key))
