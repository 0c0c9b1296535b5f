"""Lookup: hard vs soft. A dictionary answers only its own keys; attention answers any query."""

import pandas as pd
import streamlit as st

from attention.toy import examples as ex
from attention.toy.answers import FRUIT_QUERY_KEYS
from attention.toy.live import lookup_payload
from attention.toy.lookup import hard_lookup, parse_table, soft_lookup
from attention.toy.questions import questions_for
from attention.toy.rounding import DECIMALS, number, percent
from pages._focus import switch_to, update
from pages._frame import ensure_app_frame
from pages._kept import linked
from pages._lessons import questions_first
from pages._live import live_lookup
from pages._path import intro, path_links
from pages._prose import for_developers, prose
from pages._screen import phone_only
from pages._tables import column
from pages._text import md

ensure_app_frame()
REAL_LOOKUP = "I want something sweet, not durable and smooth: an apple, a banana or a chair?"

st.title("Lookup: hard vs soft")
PAGE = "pages/lookup.py"
intro(PAGE, "Attention is a lookup. A dictionary looks a word up by its exact key and returns one value; "
            "attention compares a query with every key, gives each key a weight by how well it matches, and "
            "returns a blend of all the values. So it can answer a question no key spells out.")

# --- 1. Hard lookup ---------------------------------------------------------------------------------
st.header("1 · A dictionary: exact keys only")
col_table, col_ask = st.columns([1, 2])
col_table.dataframe(pd.DataFrame({"key": list(ex.FRUIT_HARD), "value": list(ex.FRUIT_HARD.values())}),
                    hide_index=True, column_config={"key": column("key", 70), "value": column("value", 56)})
asked = col_ask.text_input("Ask the dictionary for", value="fruit", key=linked("lookup.hard_query"),
                           bind="query-params", max_chars=40)
hard = hard_lookup(ex.FRUIT_HARD, asked)
if hard.found:
    col_ask.success(f"**{md(hard.query.strip())}** → {hard.value}  (probability 1.0: an exact match)")
elif hard.near is not None:
    col_ask.warning(f"**{md(asked.strip())}** is not a key: the key is **{md(hard.near)}**, and a dictionary "
                    "matches exactly, capitals included. It has no answer.")
else:
    col_ask.warning(f"**{md(asked.strip()) or '(empty)'}** is not a key: the dictionary has no answer. "
                    "It cannot say that *fruit* is close to *apple* and *banana*.")

# --- 2. Soft lookup -----------------------------------------------------------------------------------
st.header("2 · Attention: every key matches a little")
prose("Keys describe each item by **sweetness, durability, texture**; values by **price, liking, use** "
      "(0–1 scales). The query asks for a kind of thing, not an exact key: the default asks for something "
      "sweet, not durable and smooth. Each key's score is its dot product with the query, divided by "
      "√d_k (d_k = 3 numbers per key); softmax turns the scores into weights.")
questions_first(questions_for("lookup"), PAGE)

default_rows = pd.DataFrame(
    [[label, *keys, *values] for label, keys, values in zip(ex.FRUIT_LABELS, ex.FRUIT_KEYS, ex.FRUIT_VALUES,
                                                            strict=True)],
    columns=["item", *ex.FRUIT_KEY_FEATURES, *ex.FRUIT_VALUE_FEATURES],
)
# Each column as wide as its name over "0.80" (200 px each ran to 611). An editor's seven columns, each with its
# pencil, cannot fit a phone's 364 px: there it scrolls sideways, and says so (pages/_screen.py shows the line).
edited = st.data_editor(default_rows, num_rows="dynamic", key="lookup.table", hide_index=True,
                        column_config={c: column(c, 90 if c in ("durability", "sweetness") else 80,
                                                 digits=None if c == "item" else 2) for c in default_rows.columns})
phone_only(st.caption, "Swipe the table sideways for its other columns.")
try:
    table = parse_table(edited.to_dict("records"), ex.FRUIT_KEY_FEATURES, ex.FRUIT_VALUE_FEATURES)
    st.session_state["lookup.last_good"] = table
except ValueError as err:
    table = st.session_state.get("lookup.last_good")
    st.error(f"The table was not used: {md(err)}. Showing the last table that worked.")
    if table is None:
        table = parse_table(default_rows.to_dict("records"), ex.FRUIT_KEY_FEATURES, ex.FRUIT_VALUE_FEATURES)

def thousandths(columns, labels=None) -> dict:
    """Column settings writing each of `columns` to DECIMALS places, as every weight on the page is said (a
    "_default" setting was not applied: the tables said 0.3716 where the chart said 0.372), 80 px wide under
    `labels` (default their names; the full name on hover): four fit a phone."""
    labels = labels or list(columns)
    return {c: column(label, 80, full=c, digits=DECIMALS) for c, label in zip(columns, labels, strict=True)}




def _take_live_query() -> None:
    """A drag ended in the live component: its query becomes the widgets' (and so the URL's and tables')."""
    steps = st.session_state["lookup.live"]["query_steps"]
    for key, step in zip(FRUIT_QUERY_KEYS, steps, strict=True):
        st.session_state[key] = round(step / 100, 2)


def _take_plane_pair() -> None:
    st.session_state["lookup.plane"] = st.session_state["lookup.live"]["plane_pair"]


@st.fragment
def query_and_answer(table) -> None:
    """The live query and everything it moves. A fragment: a release reruns only this part, so the table
    editor and the dictionary above are not rebuilt."""
    st.subheader("The query")
    scaled = st.toggle("divide by √d_k", value=True, key=linked("lookup.scaled"), bind="query-params",
                       help="Divide each score by the square root of d_k, the number of features in a key (3 here).")
    with st.expander("Exact values (typed, kept in the link)"):
        cols = st.columns(3)
        query = [col.number_input(name, 0.0, 1.0, float(ex.FRUIT_QUERY[f]), 0.01, key=linked(key), bind="query-params",
                                  format="%.2f")
                 for f, (col, name, key) in enumerate(zip(cols, ex.FRUIT_KEY_FEATURES, FRUIT_QUERY_KEYS, strict=True))]
    live_lookup(lookup_payload(query, table.keys, table.values, table.labels, ex.FRUIT_KEY_FEATURES,
                               ex.FRUIT_VALUE_FEATURES, scaled=scaled, pair=st.session_state.get("lookup.plane", 0),
                               key="lookup"),
                key="lookup.live", on_query=_take_live_query, on_pair=_take_plane_pair)
    st.caption("Drag a slider or the point in the plane: the weights redraw at every step, from numbers "
               "computed in advance for every slider position. Arrow keys, Home and End move a focused slider or "
               "the point. The tables below follow when you let go.")

    res = soft_lookup(query, table.keys, table.values, table.labels, scaled=scaled)
    t = res.trace

    st.subheader("Step by step")
    c1, c2, c3 = st.columns(3)
    c1.latex(r"s_j = q \cdot k_j")
    c2.latex(r"\tilde s_j = s_j / \sqrt{d_k}" if scaled else r"\tilde s_j = s_j \quad(\text{no scaling})")
    c3.latex(r"\alpha_j = \frac{e^{\tilde s_j}}{\sum_i e^{\tilde s_i}}")
    steps = pd.DataFrame({"item": res.labels, "q·k (dot product)": t.scores[0],
                          f"scaled (× {t.scale:.3f})": t.scaled[0], "softmax weight": res.weights})
    st.dataframe(steps, hide_index=True, key="lookup.steps",
                 column_config={"item": column("item", 70),
                                **thousandths(steps.columns[1:], ["q·k", "scaled", "weight"])})
    st.caption(f"d_k = {t.d_k}, so the scores are multiplied by {t.scale:.3f}" + (" (= 1/√d_k)" if scaled else
               " (no scaling)") + ".")

    st.subheader("The answer: a blend of the values")
    st.latex(r"\text{output} = \sum_j \alpha_j v_j")
    out = pd.DataFrame([res.output], columns=list(ex.FRUIT_VALUE_FEATURES), index=["output"])
    st.dataframe(out, key="lookup.output", column_config=thousandths(out.columns))
    shares = ", ".join(f"{md(lab)} {number(w)}" for lab, w in zip(res.labels, res.weights, strict=True))
    st.info((f"No item wins: the largest weights are equal ({percent(res.winner_weight)} each)" if res.tie else
             f"**{md(res.winner)}** wins with {percent(res.winner_weight)} of the attention")
            + "; the output blends every "
            f"row's values by their weights ({shares}).")


query_and_answer(table)

st.subheader("The same q · k in a real model")
st.markdown("A real head does this lookup for every token at once: its query is the token's vector times W_Q, "
            "its keys every token's vector times W_K, and the weights are the same softmax of q · k / √d_k.")
if st.button("See q · k in a real head (pick “apple” as its query there)", icon=":material/open_in_new:",
             key="lookup.real"):
    update(text=REAL_LOOKUP, query=None, layer=0, head=0, aggregation="head")
    switch_to("pages/inside_head.py")

published = soft_lookup(ex.FRUIT_QUERY, ex.FRUIT_KEYS, ex.FRUIT_VALUES, ex.FRUIT_LABELS).trace.scaled[0]
for_developers("The table and query are attention.toy.examples (FRUIT_*; seed 002, whose scaled scores for the "
               f"default query, {', '.join(number(x) for x in published)}, the step-by-step table shows); the lookups "
               "attention.toy.lookup (hard_lookup, soft_lookup); the drag's frames attention.toy.live.lookup_payload; "
               "the questions attention.toy.questions.")
path_links(PAGE)
