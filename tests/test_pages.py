"""Every page through Streamlit's AppTest: widgets set by key, numbers on screen checked against the math."""

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention.classroom import mark_skipped, new_token
from attention.figures.canvas import CanvasHeatmap
from attention.toy import examples as ex
from pages._site import SECTIONS

APP = Path(__file__).resolve().parent.parent / "app.py"

TOY_PAGES = ["pages/home.py"] + [f"pages/{name}.py" for name in (
    "lookup", "self_attention", "scaling", "scoring", "multihead", "toy_ambiguity", "positions", "bottleneck")]


def open_page(path: str, *, questions: bool = False) -> AppTest:
    """`path` opened in a fresh session. A toy page holds what follows its questions until they are
    answered, and so does a model page showing its question's own example: these tests read the whole page, as
    a learner who skipped them (questions=True: as asked)."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    if not questions:  # this session's browser has opened every page whole before (kept in the database)
        at.session_state["learner.token"] = token = new_token()
        for es in SECTIONS.values():
            for e in es:
                mark_skipped(token, Path(e.path).stem)
    at.run()
    at.switch_page(path)
    at.run()
    assert not at.exception, at.exception
    return at


def chart(at: AppTest, key: str) -> dict:
    """The Plotly spec of the chart whose Streamlit key is `key`."""
    for el in at.get("plotly_chart"):
        spec = json.loads(el.proto.spec)
        if el.proto.id.endswith(key) or key in el.proto.id:
            return spec
    raise KeyError(f"no chart with key {key}; ids: {[el.proto.id for el in at.get('plotly_chart')]}")


def canvas(at: AppTest, key: str) -> CanvasHeatmap:
    """The canvas heatmap (pages/_canvas.py) whose Streamlit key is `key`, read back from the bytes sent."""
    for el in at.get("bidi_component"):
        if el.proto.id.endswith(key) or key in el.proto.id:
            return CanvasHeatmap.from_bytes(el.proto.bytes)
    raise KeyError(f"no canvas heatmap with key {key}; ids: {[el.proto.id for el in at.get('bidi_component')]}")


def array(value) -> np.ndarray:
    """Plotly >= 6 stores arrays as {'dtype', 'bdata', 'shape'}; plain lists otherwise."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return arr.reshape([int(s) for s in str(shape).split(",")]) if shape else arr
    return np.asarray(value, dtype=float)


def table_with(at: AppTest, column: str):
    """The first dataframe on the page that has `column`."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise KeyError(f"no table with column {column!r}")


def bar_values(at, key):
    return array(chart(at, key)["data"][0]["y"])


@pytest.mark.parametrize("path", TOY_PAGES)
def test_page_renders_without_exception(path):
    at = open_page(path)
    if "home" not in path and "lookup" not in path:  # lookup's charts are drawn by its live component
        assert at.get("plotly_chart"), f"{path} shows no chart"


def test_home_links_every_page():
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    links = {el.proto.page for el in at.get("page_link")}
    assert {Path(p).stem for p in TOY_PAGES[1:]} <= {Path(p).stem for p in links}


def lookup_weights(at) -> np.ndarray:
    return table_with(at, "softmax weight")["softmax weight"].to_numpy()


def test_lookup_sweetness_raises_apple_weight():
    at = open_page("pages/lookup.py")
    before = lookup_weights(at)
    np.testing.assert_allclose(before.sum(), 1.0, atol=1e-9)
    at.number_input(key="lookup.sweetness").set_value(1.0).run()  # what a drag of the live slider sets
    after = lookup_weights(at)
    assert after[0] > before[0]  # apple is the sweetest key
    assert at.session_state["lookup.live"]["query_steps"] == [80, 20, 10]  # the component's default state
    at.number_input(key="lookup.durability").set_value(1.0).run()
    at.number_input(key="lookup.sweetness").set_value(0.0).run()
    assert int(np.argmax(lookup_weights(at))) == 2  # chair
    assert "chair" in at.info[0].value


def test_live_lookup_payload_is_soft_lookup_at_every_step():
    import base64

    from attention.toy.live import STEPS, lookup_payload
    from attention.toy.lookup import soft_lookup

    data = lookup_payload([0.8, 0.2, 0.1], ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS, ex.FRUIT_KEY_FEATURES,
                          ex.FRUIT_VALUE_FEATURES, pair=1)
    sweeps = np.frombuffer(base64.b64decode(data["sweeps"]["weights"]), "<u2").reshape(3, 101, 3)
    plane = np.frombuffer(base64.b64decode(data["plane"]["weights"]), "<u2").reshape(101, 101, 3)
    rng = np.random.default_rng(0)
    for f, s in zip(rng.integers(0, 3, 30), rng.integers(0, 101, 30), strict=True):
        q = np.array([0.8, 0.2, 0.1])
        q[f] = STEPS[s]
        expected = soft_lookup(q, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS).weights
        np.testing.assert_array_equal(sweeps[f, s], np.rint(expected * 1000))
    for i, j in rng.integers(0, 101, (30, 2)):
        q = np.array([STEPS[i], 0.2, STEPS[j]])  # pair 1: sweetness across, texture up
        expected = soft_lookup(q, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS).weights
        np.testing.assert_array_equal(plane[i, j], np.rint(expected * 1000))
    size = len(json.dumps(data))
    assert size < 200_000, size  # the budget for precomputed data per page


def test_lookup_default_shows_article_scores_and_scaling_toggle():
    at = open_page("pages/lookup.py")
    steps = table_with(at, "softmax weight")
    assert np.round(steps.iloc[:, 2].to_numpy(), 2).tolist() == list(ex.FRUIT_PUBLISHED_SCORES)
    scaled = lookup_weights(at)
    at.toggle(key="lookup.scaled").set_value(False).run()
    unscaled = lookup_weights(at)
    assert unscaled[0] > scaled[0]  # without 1/sqrt(3) the softmax is sharper


def test_lookup_hard_dictionary():
    at = open_page("pages/lookup.py")
    assert at.warning and "not a key" in at.warning[0].value
    at.text_input(key="lookup.hard_query").set_value("apple").run()
    assert "9" in at.success[0].value


def test_self_attention_thinking_machines_numbers():
    at = open_page("pages/self_attention.py")
    scaled = table_with(at, "scaled")["scaled"].to_numpy()
    np.testing.assert_allclose(scaled, [14, 12], atol=1e-6)
    np.testing.assert_allclose(bar_values(at, "self.bar"), [0.8808, 0.1192], atol=1e-4)
    at.select_slider(key="self.step").set_value("3 · scores").run()
    assert not at.get("plotly_chart") or "self.bar" not in str([c.proto.id for c in at.get("plotly_chart")])


def test_self_attention_cat_sentence_query_choice():
    at = open_page("pages/self_attention.py")
    at.selectbox(key="self.example").set_value("Cat sat on the mat").run()
    at.selectbox(key="self.query").set_value(2).run()
    w = bar_values(at, "self.bar")
    assert w.shape == (5,) and abs(w.sum() - 1) < 1e-9


def test_scaling_entropy_drops_without_scaling():
    at = open_page("pages/scaling.py")
    at.number_input(key="scaling.d").set_value(1024).run()  # what releasing the live d slider sets
    table = table_with(at, "weight, unscaled")
    assert table["weight, unscaled"].max() > table["weight, scaled"].max()
    ent = chart(at, "scaling.entropy")["data"]
    assert array(ent[0]["y"])[-1] < array(ent[1]["y"])[-1]  # unscaled entropy collapses at d = 1024


def test_scoring_page_five_methods_and_causal():
    at = open_page("pages/scoring.py")
    charts = [c for c in at.get("plotly_chart") if "scoring." in c.proto.id]
    assert len(charts) == 5
    at.toggle(key="scoring.causal").set_value(True).run()
    z = array(chart(at, "scoring.dot")["data"][0]["z"])
    assert np.all(np.isnan(z[np.triu_indices(5, 1)]))  # masked cells drawn as gaps
    text = chart(at, "scoring.dot")["data"][0]["text"]
    assert text[0][4] == "masked"


def test_multihead_heads_and_causal_mask():
    """Every head in one figure (one colour scale, equal cells), each head's weights its own trace."""
    at = open_page("pages/multihead.py")
    heads = chart(at, "mh.heads_chart")["data"]
    assert len(heads) == 4 and {t.get("coloraxis") for t in heads} == {"coloraxis"}
    at.toggle(key="mh.causal").set_value(True).run()
    for trace in chart(at, "mh.heads_chart")["data"]:
        z = array(trace["z"])
        assert np.all(np.isnan(z[np.triu_indices(6, 1)])) and trace["text"][0][5] == "masked"
        np.testing.assert_allclose(np.nansum(z, axis=1), 1.0, atol=1e-9)
    cross = array(chart(at, "mh.cross")["data"][0]["z"])
    assert cross.shape == (7, 6)
    assert int(np.argmax(cross[1])) == 1  # "chat" attends to "cat"


def test_toy_ambiguity_pull_sharpens_bank():
    at = open_page("pages/toy_ambiguity.py")
    river = bar_values(at, "toy.bank_bar0.1")
    assert int(np.argmax(river)) == 4  # "river"
    at.number_input(key="toy.pull").set_value(0.0).run()
    np.testing.assert_allclose(bar_values(at, "toy.bank_bar0.1"), 1 / 6)
    at.text_input(key="toy.bank0").set_value("I sat on the sofa bank").run()
    assert at.warning and "unknown word" in at.warning[0].value


def test_positions_page_shuffle_keeps_weights_until_positions_are_added():
    at = open_page("pages/positions.py")
    assert float(at.metric[0].value) < 1e-9  # "Largest change of any weight", no positions
    at.button(key="pos.shuffle_button").click().run()
    assert at.number_input(key="pos.shuffle").value == 2 and float(at.metric[0].value) < 1e-9
    at.toggle(key="pos.add").set_value(True).run()
    assert float(at.metric[0].value) > 1e-3 and not at.exception
    at.slider(key="pos.rope_q").set_value(8).run()
    at.slider(key="pos.rope_k").set_value(6).run()
    scores = table_with(at, "score")["score"].tolist()
    assert scores[1] == pytest.approx(scores[2])  # both moved 5 later: same score


def test_bottleneck_page_translates_and_refuses_bad_sequences():
    at = open_page("pages/bottleneck.py")
    outputs = table_with(at, "output")
    assert outputs["output"].tolist()[1] == "31415926535897932384"[::-1]  # attention reverses the default
    assert "%" in at.metric[0].value
    for text, message in (("12a4", "Only the digits"), ("", "at least one digit"), ("9" * 200, "At most 30")):
        at.text_input(key="bn.digits").set_value(text).run()
        assert not at.exception and any(message in w.value for w in at.warning), (text, [w.value for w in at.warning])


def _frames(panel: dict, shape) -> np.ndarray:
    return np.frombuffer(base64.b64decode(panel["frames"]), "<i4").reshape(shape) / 1000


def test_live_sweeps_hold_the_math_at_every_step():
    """Each page's precomputed frames against numpy written out here, at random steps."""
    from attention.toy import live

    rng = np.random.default_rng(1)
    cat = ex.cat_sentence()
    q, k, v = cat.x @ cat.w_q, cat.x @ cat.w_k, cat.x @ cat.w_v
    sweeps = live.query_sweeps(cat.x, cat.w_q, cat.w_k, cat.w_v, 2, live.QUERY_VALUES)
    for f, s in zip(rng.integers(0, 3, 30), rng.integers(0, len(live.QUERY_VALUES), 30), strict=True):
        qi = q[2].copy()
        qi[f] = live.QUERY_VALUES[s]
        scores = k @ qi / np.sqrt(3)
        w = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
        np.testing.assert_allclose(sweeps["scaled"][f, s], scores, atol=1e-12)
        np.testing.assert_allclose(sweeps["weights"][f, s], w, atol=1e-12)
        np.testing.assert_allclose(sweeps["output"][f, s], w @ v, atol=1e-12)
    x_source, x_target = ex.translation_embeddings()
    cross = live.cross_attention_frames(live.SHARPNESS_VALUES)
    for s in rng.integers(0, len(live.SHARPNESS_VALUES), 10):
        sharp = live.SHARPNESS_VALUES[s]
        scores = (sharp * x_target) @ (sharp * x_source).T / np.sqrt(x_source.shape[1])
        w = np.exp(scores - scores.max(1, keepdims=True))
        np.testing.assert_allclose(cross[0, s], w / w.sum(1, keepdims=True), atol=1e-12)
    row = np.array([1.5, -0.2, 0.3, -np.inf])
    frames = live.temperature_frames(row, live.TEMPERATURE_VALUES)
    for s in rng.integers(0, len(live.TEMPERATURE_VALUES), 10):
        e = np.exp(row / live.TEMPERATURE_VALUES[s] - row.max() / live.TEMPERATURE_VALUES[s])
        np.testing.assert_allclose(frames[0, s, 0], e / e.sum(), atol=1e-12)


def test_live_sweep_payloads_round_trip_and_stay_small():
    from attention.toy import live

    tokens, frames = live.pull_frames(ex.BANK_SENTENCES[0], "bank", live.PULL_VALUES)
    data = live.sweep_payload([live.slider("pull", live.PULL_VALUES, 4.0, "toy.pull")],
                              [live.Panel("bank", "bars", ("bank",), tokens, frames)], key="t")
    assert data["sliders"][0]["index"] == 8  # 4.0 is the ninth step of 0, 0.5, ...
    np.testing.assert_allclose(_frames(data["panels"][0], frames.shape), np.rint(frames * 1000) / 1000)
    # The bar drawn darker in each frame is Python's: the largest weight of that frame.
    assert data["panels"][0]["best"] == [max(range(len(row)), key=list(row).__getitem__) for row in frames[0, :, 0]]
    dims, temps = live.slider_values(live.DIM_VALUES, 64), live.TEMPERATURE_VALUES
    assert 64 in dims and len(dims) == len(live.DIM_VALUES) + 1  # a typed d joins the slider's steps
    scaling = live.scaling_frames(64, 1.0, 32, dims, temps)  # the largest the Why-scale page makes
    keys = [str(j) for j in range(32)]
    data = live.sweep_payload([live.slider("d", dims, 1, "d"), live.slider("T", temps, 1.0, "T")],
                              [live.Panel("u", "bars", ("q",), keys, scaling["unscaled"]),
                               live.Panel("s", "bars", ("q",), keys, scaling["scaled"])], key="s")
    assert len(json.dumps(data)) < 200_000
    with pytest.raises(ValueError, match="do not match"):
        live.sweep_payload([live.slider("x", (0.0, 1.0), 0.0, "x")], [live.Panel("p", "bars", ("r",), ("a",), frames)],
                           key="bad")


def test_a_page_that_stops_on_a_text_it_cannot_read_still_ends_with_back_and_next():
    """Model heads and Predictions ended on "Type a sentence first" alone: no Back, no Next (issue 68)."""
    for page, box in (("pages/model_heads.py", "heads.text"), ("pages/predictions.py", "pred.text")):
        at = open_page(page)
        at.text_area(key=box).set_value("").run()
        assert not at.exception and at.warning, page  # it says what is wrong
        assert [b for b in at.button if b.key == "path.back"] and [b for b in at.button if b.key == "path.next"], page


def test_a_released_step_takes_the_type_its_widget_keeps():
    """Why scale's d is an integer input; its slider's steps were built in float64 (a typed d joins them), and the
    release handed numpy 84.0 (issue 68). The component's step arrives as JSON, maybe 3.0."""
    from attention.toy import live

    dims = live.slider_values(live.DIM_VALUES, 64)
    d = live.slider("d", dims, 64, "scaling.d")
    assert all(type(d.value_at(step)) is int for step in (0, 3.0, len(dims) - 1))
    assert d.value_at(len(dims) - 1) == 1024 and d.values[d.index] == 64
    temperature = live.slider("T", live.slider_values(live.TEMPERATURE_VALUES, 1.0), 1.0, "scaling.temperature")
    assert type(temperature.value_at(4)) is float and temperature.value_at(4) == pytest.approx(0.5)
    assert live.slider("s", live.SHARPNESS_VALUES, 3.0, "mh.sharp").kind is float  # a float input stays float


def test_the_chart_code_fetched_ahead_is_what_streamlit_loads_for_a_chart_and_a_table():
    """pages/_prefetch.py names Streamlit's lazily loaded modules for st.plotly_chart and st.dataframe by their
    files: both are found, and Streamlit's own entry module imports them by those names (a Streamlit that renames
    them fails here, not silently in the browser)."""
    from pages._prefetch import STATIC_JS, chunk_urls

    names = [url.rsplit("/", 1)[-1] for url in chunk_urls()]
    assert [n.split(".")[0] for n in names] == ["PlotlyChart", "DataFrame"]
    html = (STATIC_JS.parent.parent / "index.html").read_text(encoding="utf-8")
    entry = (STATIC_JS / re.search(r'<script type="module"[^>]* src="\./static/js/([^"]+)"', html)[1]).read_text(
        encoding="utf-8")  # the module index.html starts
    assert all(name in entry for name in names)
    at = open_page("pages/lookup.py")
    assert [el for el in at.get("bidi_component") if "prefetch" in el.proto.id]  # mounted by the app's frame


# --- One number, said one way (issue 59): a question's weights, the page's answer and its live chart ----------
def _live_lookup_weights(at) -> np.ndarray:
    """The weights the live lookup draws now: its sweep of the first feature at the query's own step."""
    el = next(el for el in at.get("bidi_component") if el.proto.id.endswith("lookup.live"))
    data = json.loads(el.proto.json)
    sweeps = np.frombuffer(base64.b64decode(data["sweeps"]["weights"]), "<u2").reshape(3, 101, -1)
    return sweeps[0, data["query_steps"][0]] / 1000


def test_lookup_says_a_questions_weights_one_way_everywhere():
    """Lookup's first question said its weights three ways (0.30 in its sentence, 0.296 on its bars, and the
    page's answer line in whole percents). Set to the question's state, the sentence, the bars, the page's answer
    line and the live chart all say the weights written out here, to thousandths."""
    from attention.toy.questions import questions_for

    q = questions_for("lookup")[0]
    state = dict(q.state)
    query = np.array([state["lookup.sweetness"], state["lookup.durability"], state["lookup.texture"]])
    scores = np.asarray(ex.FRUIT_KEYS) @ query / np.sqrt(3)
    weights = np.exp(scores) / np.exp(scores).sum()
    said = [f"{label} {w:.3f}" for label, w in zip(ex.FRUIT_LABELS, weights, strict=True)]
    reveal = q.reveal()
    assert all(s in reveal.numbers for s in said), reveal.numbers
    assert [f"{label} {reveal.shown(v)}" for label, v in reveal.bars] == said
    at = open_page("pages/lookup.py")
    for key, value in q.state:
        if key == "lookup.scaled":
            at.toggle(key=key).set_value(value)
        else:
            at.number_input(key=key).set_value(value)
    at.run()
    answer = " ".join(m.value for m in at.info)
    assert all(s in answer for s in said), answer
    steps = next(df for df in at.dataframe if "softmax weight" in df.value.columns)
    assert json.loads(steps.proto.columns)["softmax weight"]["type_config"]["format"] == "%.3f"  # not 0.2957
    assert [f"{w:.3f}" for w in _live_lookup_weights(at)] == [f"{w:.3f}" for w in weights]


def test_multihead_says_which_two_readings_and_asks_with_s_explained():
    """“can be read two ways” named neither; the sharpness question asked about s before the page said what it
    is (it came before the section that does)."""
    from attention.toy.questions import questions_for

    at = open_page("pages/multihead.py")
    text = " ".join(m.value for m in at.markdown)
    assert "Hang them not, let them go" in text
    sharp = next(q for q in questions_for("multihead") if q.key == "mh.sharp")
    assert "sharpness s multiplies" in sharp.ask and "le chat était assis sur le tapis" in sharp.ask


def test_scaling_answers_with_the_charts_averages_and_explains_the_temperature():
    """The answers said one random draw's 0.72 and 0.49 while the chart below averaged 200 draws: now each bar of
    an answer is the chart's own point. And T, the temperature, is said in words on the page."""
    from attention.toy.questions import questions_for

    at = open_page("pages/scaling.py")
    for key, value in questions_for("scaling")[0].state:
        at.number_input(key=key).set_value(value) if key != "scaling.keys" else at.slider(key=key).set_value(value)
    at.run()
    spec = chart(at, "scaling.max")
    dims = array(spec["data"][0]["x"]).astype(int).tolist()
    points = {trace["name"]: dict(zip(dims, array(trace["y"]), strict=True)) for trace in spec["data"]}
    unscaled, scaled = (q.reveal() for q in questions_for("scaling"))
    without, with_ = points["without scaling"], points["with ÷√d"]
    assert [v for _, v in unscaled.bars] == pytest.approx([without[8], without[512]])
    assert [v for _, v in scaled.bars] == pytest.approx([with_[8], with_[512]])
    assert f"{points['with ÷√d'][512]:.3f}" in scaled.numbers
    import html

    from attention.glossary import definition

    text = " ".join(m.value for m in at.markdown)
    assert "T is the softmax's" in text and "Attention uses T = 1" in text
    assert html.escape(definition("temperature"), quote=True) in text  # the glossary's words, on hover
