"""Predict, then see: every answer is computed from the state it reveals, and the path walks through."""

import numpy as np
import pytest

from attention.toy import examples as ex
from attention.toy import lessons
from attention.toy.lookup import soft_lookup
from pages._site import PATH, entry
from tests.test_pages import open_page


def test_every_answer_is_a_choice_and_the_lookups_is_soft_lookup_at_its_state():
    lessons.check_answers()
    q = lessons.questions_for("lookup")[0]
    state = dict(q.state)
    query = [state[k] for k in lessons.FRUIT_QUERY_KEYS]
    weights = np.exp(np.asarray(ex.FRUIT_KEYS) @ query / np.sqrt(3))  # softmax by hand, not through attention/
    assert q.reveal().answer == ex.FRUIT_LABELS[int(np.argmax(weights))]
    assert q.reveal().answer == soft_lookup(query, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS).winner


def test_changing_an_examples_numbers_changes_the_answer(monkeypatch):
    winner = lessons.questions_for("lookup")[0].reveal().answer
    keys = np.array(ex.FRUIT_KEYS)
    i = ex.FRUIT_LABELS.index(winner)
    other = (i + 1) % 3
    keys[[i, other]] = keys[[other, i]]  # the two items swap their keys
    monkeypatch.setattr(ex, "FRUIT_KEYS", keys)
    assert lessons.questions_for("lookup")[0].reveal().answer == ex.FRUIT_LABELS[other]
    sense = lessons.questions_for("toy_ambiguity")[0].reveal().answer
    monkeypatch.setattr(ex, "BANK_W_V", ex.BANK_W_V[:, ::-1].copy())  # the values' nature and finance swapped
    assert lessons.questions_for("toy_ambiguity")[0].reveal().answer == {"nature": "finance",
                                                                         "finance": "nature"}[sense]


def _commit(at, key: str, choice: str):
    at.radio(key=f"lesson.choice.{key}").set_value(choice)
    next(b for b in at.button if str(b.key).startswith(f"FormSubmitter:lesson.form.{key}-")).click().run()
    return at


@pytest.mark.slow
def test_each_page_reveals_the_computed_answer_at_the_state_it_sets():
    for page in sorted({q.page for q in lessons.QUESTIONS}):
        at = open_page(f"pages/{page}.py")
        for q in lessons.questions_for(page):
            reveal = q.reveal()
            _commit(at, q.key, q.choices[0])
            assert not at.exception, (q.key, at.exception)
            shown = " ".join(m.value for m in (*at.success, *at.info)).replace("\\", "")
            assert f"**{reveal.answer}**" in shown and reveal.numbers[1:] in shown, (q.key, shown)  # capitalised
            for key, value in q.state:
                assert at.session_state[key] == value, (q.key, key)


@pytest.mark.slow
def test_a_model_question_is_answered_from_the_models_own_result(minilm):
    from attention.models.recorded.questions import questions_for
    from attention.models.recorded.views import Reading, query_row

    at = open_page("pages/ambiguous_words.py")
    q = questions_for("ambiguous_words")[0]
    assert not [r for r in at.radio if str(r.key).startswith("lesson.")]  # about “it”: the page shows “bank”
    at.button(key=f"lesson.show.{q.key}").click().run()
    _commit(at, q.key, "animal")
    att = minilm.attend(ex.IT_SENTENCES[0])
    row = query_row(att, att.tokens.index("it"), layer=4, reading=Reading()).matrix[0]  # what the page draws
    shown = " ".join(m.value for m in (*at.success, *at.info)).replace("\\", "")
    assert f"**{att.tokens[int(row.argmax())]}**" in shown and not at.exception


@pytest.mark.slow
def test_the_path_walks_from_home_to_the_last_page_through_next():
    """Home's Start button, then each page's Next. (AppTest runs the page it was last switched to again on
    the following run, so each step is opened by name before its Next is clicked.)"""
    at = open_page("pages/home.py")
    at.button(key="path.start").click().run()
    assert at.button(key="path.back").label == "Back: Home" and at.title[0].value == entry(PATH[0]).title
    for here in PATH[:-1]:
        at.switch_page(here).run()
        assert not at.exception, here
        at.button(key="path.next").click().run()
        assert at.button(key="path.back").label == f"Back: {entry(here).title}", here  # we are one step on
    at.switch_page(PATH[-1]).run()
    assert not [b for b in at.button if b.key == "path.next"]  # the end of the path
    at.switch_page("pages/home.py").run()
    assert f"{len(PATH)} of {len(PATH)}" in " ".join(m.value for m in at.markdown).replace("\\", "")


@pytest.mark.slow
def test_the_toy_examples_open_the_same_sentences_in_a_real_model():
    at = open_page("pages/toy_ambiguity.py")
    at.text_input(key="toy.bank0").set_value("I sat on the bank").run()
    at.button(key="toy.real.bank").click().run()
    assert not at.exception and at.text_input(key="amb.a").value == "I sat on the bank"
    assert at.text_input(key="amb.b").value == ex.BANK_SENTENCES[1] and at.text_input(key="amb.word").value == "bank"
    at = open_page("pages/lookup.py")
    at.button(key="lookup.real").click().run()
    assert not at.exception and "apple" in at.text_area(key="inside.text").value
    assert any(s.label == "Query token" for s in at.selectbox)  # Inside one head, on that sentence
