"""Explain, ask, then show: every answer derived independently, nothing answered before it is asked, and
prose written for students.

The toy answers are worked out here by hand in numpy from the examples' numbers (never through attention/'s
functions); the model answers from the model's own eager attentions and logits.
"""

import base64
import json
import re

import numpy as np
import pytest

from attention.figures.canvas import MAGIC, CanvasHeatmap
from attention.toy import answers as toy_answers
from attention.toy import examples as ex
from attention.toy import questions as toy_questions
from pages._site import HOME, PATH, SECTIONS, entry
from tests.test_pages import chart, open_page


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _weights(x, w_q, w_k, mask=None):
    """Scaled dot-product weights, written out: softmax(x W_Q (x W_K)^T / sqrt(d_k))."""
    q, k = x @ w_q, x @ w_k
    s = q @ k.T / np.sqrt(q.shape[1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    return _softmax(s)


def _sinusoid(n, d):
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            pe[pos, i] = np.sin(pos / 10000 ** (i / d))
            if i + 1 < d:
                pe[pos, i + 1] = np.cos(pos / 10000 ** (i / d))
    return pe


def _by_hand(key: str, state: dict) -> str:
    """The answer to toy question `key` at its state, worked out from the examples' numbers."""
    if key == "lookup.winner":
        q = np.array([state[k] for k in toy_answers.FRUIT_QUERY_KEYS])
        return ex.FRUIT_LABELS[int(np.argmax(np.asarray(ex.FRUIT_KEYS) @ q))]  # softmax keeps the order
    if key == "lookup.scaling":
        q = np.array([state[k] for k in toy_answers.FRUIT_QUERY_KEYS])
        s = np.asarray(ex.FRUIT_KEYS) @ q
        return "grows" if _softmax(s).max() > _softmax(s / np.sqrt(3)).max() else "shrinks"
    if key == "self.sum":  # softmax's shares of one whole
        return "1"
    if key == "self.thinking":
        data = ex.thinking_machines() if state["self.example"].startswith("Thinking") else ex.cat_sentence()
        row = _weights(data.x, data.w_q, data.w_k)[state["self.query"]]
        return data.tokens[int(np.argmax(row))]
    if key in ("scaling.unscaled", "scaling.scaled"):  # the largest weight, averaged over draws of our own
        rng = np.random.default_rng(2024)
        d, keys, t = state["scaling.d"], state["scaling.keys"], state["scaling.temperature"]
        q, k = rng.standard_normal((2000, 1, d)), rng.standard_normal((2000, keys, d))
        scores = (q * k).sum(-1) / (1.0 if key == "scaling.unscaled" else np.sqrt(d))
        top = _softmax(scores / t).max(-1).mean()
        if key == "scaling.unscaled":
            return "it approaches 1" if top > 0.9 else "it stays about the same"
        return "yes" if top >= 0.9 else "no"
    if key == "scoring.flattest":
        cat, p = ex.cat_sentence(), ex.scoring_parameters()
        q, k = cat.x @ cat.w_q, cat.x @ cat.w_k
        m, rr, ad = p["multiplicative"], p["reduced_rank"], p["additive"]
        scores = {"dot": q @ k.T, "scaled_dot": q @ k.T / np.sqrt(3), "multiplicative": q @ m["w"] @ k.T,
                  "reduced_rank": (q @ rr["u"].T) @ (k @ rr["w_v"].T).T,
                  "additive": np.array([[ad["v_a"] @ np.tanh(ad["w1"] @ qi + ad["w2"] @ kj) for kj in k] for qi in q])}
        spread = {name: float(np.mean([-(r * np.log(r)).sum() for r in _softmax(s)])) for name, s in scores.items()}
        return max(spread, key=spread.get)
    if key == "scoring.first":  # a causal first row holds one key
        return "1"
    if key == "mh.causal":
        hang = ex.hang_sentence()
        n, half = len(hang.tokens), hang.w_q.shape[1] // 2  # head 1 of 2: the first half of the columns
        w = _weights(hang.x, hang.w_q[:, :half], hang.w_k[:, :half], np.tril(np.ones((n, n), bool)))
        return f"{w[0, 1:].sum():.0f}"
    if key == "mh.sharp":
        src, tgt = ex.translation_embeddings()
        s = state["mh.sharp"]
        chat = tgt[ex.TARGET_SENTENCE.index("chat")]
        row = _softmax((s * chat) @ (s * src).T / np.sqrt(src.shape[1]))  # its query against the source's keys
        return ex.SOURCE_SENTENCE[int(np.argmax(row))]
    if key == "toy.bank":
        words = re.findall(r"[a-z']+", state["toy.bank0"].lower())
        x = np.array([ex.BANK_VOCAB[w] for w in words])
        row = _weights(x, ex.BANK_W_Q * state["toy.pull"], ex.BANK_W_K)[words.index("bank")]
        nature, finance = row @ (x @ ex.BANK_W_V)
        return "nature" if nature > finance else "finance"
    if key == "toy.it":
        words = re.findall(r"[a-z']+", state["toy.it1"].lower())
        x = np.array([ex.IT_VOCAB[w] for w in words])
        pull = state["toy.pull"]
        x1 = x + _weights(x, ex.IT_W_Q1 * pull, ex.IT_W_K1) @ (x @ ex.IT_W_V1)
        row = _weights(x1, ex.IT_W_Q2 * pull, ex.IT_W_K2)[words.index("it")]
        return max(("animal", "street"), key=lambda w: row[words.index(w)])
    if key in ("pos.without", "pos.with"):
        cat = ex.cat_sentence()
        n = len(cat.tokens)
        perm = np.random.default_rng(state["pos.shuffle"]).permutation(n)  # shuffled_order's first draw
        assert not np.all(perm == np.arange(n))
        pe = _sinusoid(n, cat.x.shape[1]) if state["pos.add"] else 0.0
        written = _weights(cat.x + pe, cat.w_q, cat.w_k)
        shuffled = _weights(cat.x[perm] + pe, cat.w_q, cat.w_k)
        back = np.empty_like(shuffled)
        back[np.ix_(perm, perm)] = shuffled  # each word's row and column back in its written place
        return "yes" if np.abs(back - written).max() > 1e-9 else "no"
    if key == "bn.long":
        return _one_vector_share(state["bn.digits"])
    raise KeyError(f"no hand derivation for {key}: write one")


def _one_vector_share(digits: str) -> str:
    """How many random sequences of this length the one-vector model reverses, run here (not read from the
    accuracy table the question reads), in the question's words."""
    from attention.seq2seq import load_translators, translate

    n = len(digits.split())
    rng = np.random.default_rng(7)
    model = load_translators().bottleneck
    right = 0
    for _ in range(60):
        seq = "".join(str(d) for d in rng.integers(0, 10, n))
        right += translate(model, seq).output == seq[::-1]
    return toy_answers.share_in_words(right / 60)


def test_every_toy_answer_is_worked_out_by_hand():
    toy_questions.check_answers()
    for q in toy_questions.QUESTIONS:
        assert q.reveal().answer == _by_hand(q.key, dict(q.state)), q.key


def test_changing_an_examples_numbers_changes_the_answer(monkeypatch):
    winner = toy_questions.questions_for("lookup")[0].reveal().answer
    keys = np.array(ex.FRUIT_KEYS)
    i = ex.FRUIT_LABELS.index(winner)
    other = (i + 1) % 3
    keys[[i, other]] = keys[[other, i]]  # the two items swap their keys
    monkeypatch.setattr(ex, "FRUIT_KEYS", keys)
    assert toy_questions.questions_for("lookup")[0].reveal().answer == ex.FRUIT_LABELS[other]
    sense = toy_questions.questions_for("toy_ambiguity")[0].reveal().answer
    monkeypatch.setattr(ex, "BANK_W_V", ex.BANK_W_V[:, ::-1].copy())  # the values' nature and finance swapped
    assert toy_questions.questions_for("toy_ambiguity")[0].reveal().answer == {"nature": "finance",
                                                                         "finance": "nature"}[sense]


# --- What the page shows -------------------------------------------------------------------------------------
def _array(value) -> np.ndarray:
    arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return arr.astype(float)


def _chart_words(spec, out: list[str]) -> None:
    """Every string and number in a Plotly spec, numbers written at 1 to 3 decimals (as a reveal writes them)."""
    if isinstance(spec, dict):
        if "bdata" in spec:
            values = _array(spec)
        else:
            for value in spec.values():
                _chart_words(value, out)
            return
    elif isinstance(spec, list):
        if spec and all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec):
            values = np.asarray(spec, dtype=float)
        else:
            for value in spec:
                _chart_words(value, out)
            return
    elif isinstance(spec, str):
        out.append(spec)
        return
    elif isinstance(spec, int | float) and not isinstance(spec, bool):
        values = np.asarray([spec], dtype=float)
    else:
        return
    finite = values[np.isfinite(values)]
    out.extend(f"{v:.{d}f}" for v in finite[:5000] for d in (1, 2, 3))


def on_screen(at) -> str:
    """All the page says: markdown, captions, alerts, metrics, tables, chart labels and chart numbers, and
    what the live components were handed."""
    words = []
    for kind in ("markdown", "caption", "success", "info", "warning", "error", "latex", "title", "header",
                 "subheader", "text", "metric", "radio", "selectbox", "button", "toggle", "slider", "text_input",
                 "text_area"):
        for el in at.get(kind):
            words.append(str(getattr(el, "value", "")))
            words.append(str(getattr(el, "label", "")))
            words.append(str(getattr(el.proto, "body", "")))
    for df in at.dataframe:
        words.append(df.value.to_string())
    for el in at.get("plotly_chart"):
        _chart_words(json.loads(el.proto.spec), words)
    words += _canvas_words(at)
    for el in at.get("bidi_component"):  # the live components' JSON (the canvases' bytes are read above)
        if el.proto.WhichOneof("data") != "bytes":
            words.append(str(el.proto))
    for el in at.get("component_instance"):
        words.append(str(el.proto))
    return " ".join(words).replace("\\", "")


def _figures(reveal) -> list[str]:
    """The figures a reveal states ("0.88", "95%"), those worth looking for: not 0 and 1, not step counts."""
    found = re.findall(r"\d+\.\d+|\d+%", reveal.numbers)
    return [f for f in found if f.rstrip("%") not in ("0", "1", "100", "0.00", "1.00", "0.000", "1.000")]


def _commit(at, key: str, choice: str):
    at.radio(key=f"lesson.choice.{key}").set_value(choice)
    next(b for b in at.button if str(b.key).startswith(f"FormSubmitter:lesson.form.{key}-")).click().run()
    assert not at.exception, (key, at.exception)
    return at


def _a_wrong_choice(q, answer: str) -> str:
    return next(c for c in q.choices if c != answer)


TOY_PAGES = sorted({q.page for q in toy_questions.QUESTIONS})


@pytest.mark.slow
@pytest.mark.parametrize("page", TOY_PAGES)
def test_a_toy_page_asks_before_it_shows_and_keeps_each_answer(page):
    """Opened fresh: none of the figures a question's answer states is on the page (text, tables, charts,
    live components) before its commit; the verdict reads as a sentence; a later answer leaves the earlier
    one and the page's widgets as they were; the rest of the page opens once every question is answered."""
    questions = toy_questions.questions_for(page)
    at = open_page(f"pages/{page}.py", questions=True)
    widgets_before = {k: at.session_state[k] for q in questions for k, _ in q.state if k in at.session_state}
    assert not [b for b in at.button if b.key == "lesson.state." + questions[0].key]
    for n, q in enumerate(questions):
        reveal = q.reveal()
        shown = on_screen(at)
        for figure in _figures(reveal):
            assert figure not in shown, (q.key, figure, "on the page before the commit")
        assert f"Question {n + 1} of {len(questions)}" in shown
        wrong = _a_wrong_choice(q, reveal.answer)
        _commit(at, q.key, wrong)
        said = " ".join(m.value for m in at.info).replace("\\", "")
        assert f"You said “{wrong}”; {reveal.said}." in said, (q.key, said)
        for figure in _figures(reveal):
            assert figure in said, (q.key, figure)
        bars = chart(at, f"lesson.bars.{q.key}")
        assert bars["layout"]["yaxis"]["ticktext"] == [label for label, _ in reveal.bars], q.key  # "them" twice
        for key, value in widgets_before.items():
            assert at.session_state[key] == value, (q.key, key, "an answer moved the page's widgets")
    said = " ".join(m.value for m in at.info).replace("\\", "")
    for q in questions:  # every verdict still there, as judged
        assert q.reveal().said in said, q.key
    assert not [b for b in at.button if b.key == "lesson.skip"]  # the page is open
    last = questions[-1]
    at.button(key=f"lesson.state.{last.key}").click().run()
    for key, value in last.state:
        assert at.session_state[key] == value, (last.key, key)


def test_a_right_answer_reads_right_and_the_page_can_be_opened_without_answering():
    q = toy_questions.questions_for("scaling")[0]
    at = open_page("pages/scaling.py", questions=True)
    assert not at.get("plotly_chart") and not [s for s in at.slider]  # nothing drawn before the question
    _commit(at, q.key, q.reveal().answer)
    assert at.success[0].value.replace("\\", "").startswith(f"Right: {q.reveal().said}.")
    at.button(key="lesson.skip").click().run()
    assert not at.exception and at.get("plotly_chart") and "Averaged over 200 random draws" in on_screen(at)


# --- Model questions: from the model's own result ---------------------------------------------------------
def _own_attentions(loaded, text):
    """The model's own eager attentions, from a fresh copy of it (not through our capture)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(loaded.network.name_or_path, attn_implementation="eager").eval()
    enc = loaded.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_attentions=True)
    tokens = loaded.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    special = np.isin(enc["input_ids"][0].numpy(), loaded.tokenizer.all_special_ids)
    return tokens, special, [a[0].double().numpy() for a in out.attentions]


def _it_by_hand(minilm, without_sinks: bool, layer: int, text: str = ex.IT_SENTENCES[0], word: str = "it") -> str:
    """What `word` looks at most in `layer` (0-based), mean of the heads, from MiniLM's own eager attentions;
    sinks (the first and special tokens, and any key with over half the weight in over half the rows) removed
    per head and each row rescaled, when asked."""
    tokens, special, attentions = _own_attentions(minilm, text)
    heads = attentions[layer]  # (H, n, n)
    rows = []
    for w in heads:
        if without_sinks:
            sinks = special | (np.arange(len(tokens)) == 0) | ((w > 0.5).mean(axis=0) > 0.5)
            w = np.where(sinks[None, :], 0.0, w)
            w = w / w.sum(axis=1, keepdims=True)
        rows.append(w[tokens.index(word)])
    return tokens[int(np.argmax(np.mean(rows, axis=0)))]


@pytest.mark.slow
def test_model_questions_are_answered_as_the_model_itself_says(minilm, smollm2):
    import torch

    from attention.models.recorded.questions import model_questions_for

    at = open_page("pages/ambiguous_words.py", questions=True)
    for q, without, layer in zip(model_questions_for("ambiguous_words"), (False, True), (4, 2), strict=True):
        shown = on_screen(at)
        assert f"Committing answers it on {q.about}, here in this box" in shown
        expected = _it_by_hand(minilm, without, layer)
        _commit(at, q.key, expected)
        assert at.success and at.success[-1].value.replace("\\", "").startswith(f"Right: “it” looks at “{expected}”")
        assert not at.exception

    from attention.models.recorded.questions import OTTER

    at = open_page("pages/model_heads.py", questions=True)
    q = model_questions_for("model_heads")[0]
    expected = _it_by_hand(minilm, False, 2, OTTER, "river")
    _commit(at, q.key, _a_wrong_choice(q, expected))
    said = " ".join(m.value for m in at.info).replace("\\", "")
    assert f"“river” looks at “{expected}” most" in said, said

    q = model_questions_for("predictions")[0]
    prompt = dict(q.focus)["text"]
    enc = smollm2.tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        best = int(smollm2.network(**enc).logits[0, -1].argmax())  # its own logits (a second copy costs 1.2 GB)
    expected = smollm2.tokenizer.decode([best])
    at = open_page("pages/predictions.py", questions=True)
    _commit(at, q.key, _a_wrong_choice(q, expected))
    assert not at.exception
    said = " ".join(m.value for m in at.info).replace("\\", "")
    assert f"predicts “{expected.replace(' ', '␣')}”" in said, said


@pytest.mark.slow
def test_a_model_question_is_answered_beside_the_readers_text_not_instead_of_it(minilm, smollm2):
    """A model page on another text than its questions': what a question asks about (its sentences, its prompt)
    is nowhere on the page before the commit, nor after it: the answer is judged on the question's example beside
    the page, which keeps the reader's text (a first-year's own sentences were replaced, issue 68). "Show this on
    the page" moves the page there, on the reader's request, and "Back to your text" gives their text back."""
    from attention.models.recorded.questions import OTTER, model_questions_for

    for page, example in (("model_heads", OTTER), ("ambiguous_words", ex.IT_SENTENCES[0]),
                          ("predictions", ex.PREDICTION_EXAMPLES["capital of France"][0])):
        at = open_page(f"pages/{page}.py", questions=True)
        before = _shown_example(at)
        assert example not in before, page
        q = model_questions_for(page)[0]
        _commit(at, q.key, q.choices[0])
        assert at.success or at.info, page  # the verdict, from the example
        assert example not in _shown_example(at), page  # the page still reads the reader's text
        at.button(key=f"lesson.state.{q.key}").click().run()
        assert example in _shown_example(at), page
        at.button(key=f"lesson.back.{q.key}").click().run()
        assert example not in _shown_example(at), page


def _shown_example(at) -> str:
    """The texts a model page reads (its text boxes) and its charts' words: what it shows, not what it asks."""
    words = [str(el.value) for el in (*at.text_input, *at.text_area)]
    for el in at.get("plotly_chart"):
        _chart_words(json.loads(el.proto.spec), words)
    words += _canvas_words(at)
    return " ".join(words)


def _canvas_words(at) -> list[str]:
    """The words the page's canvas heatmaps draw: titles, axis titles, row and column names."""
    words = []
    for el in at.get("bidi_component"):
        if el.proto.WhichOneof("data") == "bytes" and el.proto.bytes[:4] == MAGIC:
            drawn = CanvasHeatmap.from_bytes(el.proto.bytes)
            words += [drawn.title, drawn.x_title, drawn.y_title, *drawn.x_names, *drawn.y_names,
                      *(label for _, label in drawn.x_ticks + drawn.y_ticks)]
    return words


# --- Words for students -----------------------------------------------------------------------------------
DEVELOPER_TALK = re.compile(r"\b\w+\.py\b|\battention\.\w+|\bpages/|\battention/|\bseed 0\d|\btests?/")
ALL_PAGES = [HOME.path] + [e.path for entries in SECTIONS.values() for e in entries]


def _prose(at) -> list[str]:
    """The page's prose outside its "For developers" expander."""
    inside = {m.value for exp in at.expander if "For developers" in exp.label for m in exp.markdown}
    texts = []
    for kind in ("markdown", "caption", "success", "info", "warning", "error", "title", "header", "subheader"):
        for el in at.get(kind):
            if el.value not in inside:
                texts.append(str(el.value))
    for kind in ("button", "radio", "selectbox", "toggle", "slider", "text_input", "text_area", "number_input"):
        for el in at.get(kind):
            texts.append(str(el.label))
            texts.append(str(getattr(el.proto, "help", "")))
    return texts


@pytest.mark.slow
def test_no_page_talks_to_developers_outside_their_expander(minilm):
    at = open_page(ALL_PAGES[0])
    found = {}
    for path in ALL_PAGES:
        at.switch_page(path).run()
        assert not at.exception, (path, at.exception)
        for text in _prose(at):
            hits = DEVELOPER_TALK.findall(text.replace("\\", ""))
            if hits:
                found.setdefault(path, []).append((hits, text[:120]))
    assert not found, found


def test_developer_talk_is_found_where_it_is():
    assert DEVELOPER_TALK.findall("computed by attention.toy.live.query_sweeps (seed 004), pages/scaling.py")
    assert not DEVELOPER_TALK.findall("the attention of each head, in 0.5 s")


# --- The path ---------------------------------------------------------------------------------------------
def test_a_question_comes_first_and_next_asks_once_before_it_passes_one():
    """Before an answer the question's commit is the page's primary button and Next a plain one that asks once
    ("skip this question?"); once every question is answered, Next is the primary button and just goes on."""
    page = "lookup"
    at = open_page(f"pages/{page}.py")
    commit = [b for b in at.button if str(b.key).startswith("FormSubmitter:lesson.form.")]
    assert [b.proto.type for b in commit] == ["primary"] and at.button(key="path.next").proto.type == "secondary"
    at.button(key="path.next").click().run()
    assert "not answered yet" in " ".join(w.value for w in at.warning)
    assert at.button(key="path.back").label == "Back: Home"  # still here, asked
    at.button(key="path.stay").click().run()
    assert not [b for b in at.button if b.key == "path.skip"]
    for q in toy_questions.questions_for(page):
        _commit(at, q.key, q.reveal().answer)
    assert at.button(key="path.next").proto.type == "primary"
    at.button(key="path.next").click().run()
    assert at.button(key="path.back").label == f"Back: {entry(f'pages/{page}.py').title}"  # on, without a word



@pytest.mark.slow
def test_the_path_walks_from_home_to_its_end_and_every_step_says_where_it_is():
    """Home's Start button, then each page's Next. (AppTest runs the page it was last switched to again on
    the following run, so each step is opened by name before its Next is clicked.) The pages that read a
    prediction open on a model that predicts, and the last one closes the path."""
    at = open_page("pages/home.py")
    at.button(key="path.start").click().run()
    assert at.button(key="path.back").label == "Back: Home" and at.title[0].value == entry(PATH[0]).title
    for k, here in enumerate(PATH[:-1]):
        at.switch_page(here).run()
        assert not at.exception, here
        assert f"Step {k + 1} of {len(PATH)}" in " ".join(c.value for c in at.caption), here
        if here == "pages/ambiguous_words.py":  # the learner picks the encoder on the page before Predictions
            at.selectbox(key="amb.model").set_value("smollm2").run()  # (MiniLM is the page's default: a
            at.selectbox(key="amb.model").set_value("minilm").run()   # choice is a change of the focus)
        at.button(key="path.next").click().run()
        if [b for b in at.button if b.key == "path.skip"]:  # a question left unanswered: asked once, then passed
            at.button(key="path.skip").click().run()
        assert at.button(key="path.back").label == f"Back: {entry(here).title}", here  # we are one step on
        if PATH[k + 1] == "pages/predictions.py":  # opened on a model that predicts, and says why
            assert at.selectbox(key="pred.model").value == "smollm2"
            assert "MiniLM-L6 predicts no next token: the path opens this page on SmolLM2-135M" in on_screen(at)
        if PATH[k + 1] in ("pages/predictions.py", "pages/what_heads_do.py"):
            assert "is an encoder" not in on_screen(at), PATH[k + 1]
    at.switch_page(PATH[-1]).run()
    assert not [b for b in at.button if b.key == "path.next"]  # the end of the path
    end = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "The end of the path" in end and "Where to go next" in end
    assert "predicts no next token" not in on_screen(at)
    at.switch_page("pages/home.py").run()
    assert f"{len(PATH)} of {len(PATH)}" in " ".join(m.value for m in at.markdown).replace("\\", "")


def test_a_page_off_the_path_leads_back_to_the_step_the_learner_was_on():
    """A learner on step 3 who skipped step 2 opens a page off the path: Back returns to step 3, and "Continue
    the path" (and Home's Continue) goes on to step 4, not to the skipped step 2 (a step-7 student was sent to
    step 1)."""
    at = open_page("pages/lookup.py")
    at.switch_page("pages/scaling.py").run()
    at.switch_page("pages/scoring.py").run()
    assert "pages/scoring.py" not in PATH and not at.exception
    assert at.button(key="path.back").label == f"Back: {entry('pages/scaling.py').title}"
    assert at.button(key="path.next").label == f"Continue the path: {entry('pages/multihead.py').title}"
    at.switch_page("pages/home.py").run()  # Home goes on from there too
    assert at.button(key="path.start").label == f"Continue: {entry('pages/multihead.py').title}"
    at = open_page("pages/scoring.py")  # nothing of the path seen yet: its first step
    assert at.button(key="path.back").label == "Back: Home"
    assert at.button(key="path.next").label == f"Continue the path: {entry(PATH[0]).title}"


@pytest.mark.slow
def test_the_toy_examples_open_the_same_sentences_in_a_real_model():
    at = open_page("pages/toy_ambiguity.py")
    at.text_input(key="toy.bank0").set_value("I sat on the bank").run()
    at.button(key="toy.real.bank").click().run()
    assert not at.exception and at.text_area(key="amb.a").value == "I sat on the bank"
    assert at.text_area(key="amb.b").value == ex.BANK_SENTENCES[1] and at.text_input(key="amb.word").value == "bank"
    at = open_page("pages/lookup.py")
    at.button(key="lookup.real").click().run()
    assert not at.exception and "apple" in at.text_area(key="inside.text").value
    assert any(s.label == "Query token" for s in at.selectbox)  # Inside one head, on that sentence


def test_every_glossary_term_is_marked_once_and_never_inside_math():
    from pages._prose import explained

    seen: set[str] = set()
    out = explained("A head's query meets each key; the query again. $\\sqrt{d_k}$ and d_k.", seen)
    assert out.count("<abbr") == 4 and {"head", "query", "key", "d_k"} <= seen
    assert "$\\sqrt{d_k}$" in out and out.count('title="What a token is looking for') == 1
    assert explained("query", seen) == "query"  # explained once a page
