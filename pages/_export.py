"""What leaves a model page: the camera button's file name, the matrix on screen as CSV, the sentence as
.npz, and a link that reopens the view."""

import functools
import weakref
from urllib.parse import urlencode

import streamlit as st

from attention import figures
from attention.focus import LINK_TEXT_CHARS
from attention.models import MatrixView, ModelAttention, comparison_npz, file_stem, matrix_csv, sentence_npz
from pages._focus import current


def chart_config(*name_parts) -> dict:
    """st.plotly_chart's config: the camera saves `model_layer-3_head-5.png` (or .svg, as the sidebar's
    "Chart images" says) at 2×."""
    return figures.image_config(file_stem(*name_parts), current().image_format)


def view_link(url: str) -> str:
    """`url` with the query parameters that reopen this view: the focus's (pages/_focus.py writes them on
    every model page) and the page's own widgets'."""
    return f"{url.split('?')[0]}?{urlencode(st.query_params.to_dict())}"


def _npz_of(result: weakref.ref) -> bytes:
    """The .npz download, built when clicked. The button keeps this callable until it is drawn again, so it
    holds the result weakly: a strong reference kept a 4,096-token result (0.8 GB) alive beside the next."""
    att = result()
    if att is None:  # the result left the cache since the page was drawn (another text was read)
        raise RuntimeError("this sentence's result is no longer cached: run the page again and download")
    return sentence_npz(att)


def export_row(att: ModelAttention, view: MatrixView, *name_parts) -> None:
    """Downloads of the matrix on screen (CSV, as the view was re-read) and of everything for the sentence
    (.npz), and a link that reopens this view."""
    stem = file_stem(*name_parts)
    row = st.container(horizontal=True, wrap=True)  # buttons as wide as their labels, wrapping: three columns
    c1 = c2 = c3 = row                                # in half a page cut them to "C…" at 800 px
    c1.download_button("CSV", functools.partial(matrix_csv, view), file_name=f"{stem}.csv", mime="text/csv",
                       icon=":material/table:", on_click="ignore", key=f"csv.{stem}",
                       help="The matrix on screen, one row per query, with its labels.")
    c2.download_button(".npz", functools.partial(_npz_of, weakref.ref(att)),
                       file_name=f"{file_stem(att.model_name, 'sentence')}.npz", mime="application/octet-stream",
                       icon=":material/download:", on_click="ignore", key=f"npz.{stem}",
                       help="Tokens, ids, every layer's weights (or q, k, v for long inputs), model name and text; "
                            "np.load(path) reads it back with numpy alone.")
    with c3.popover("Link", icon=":material/link:", help="A link that reopens this view"):
        url = st.context.url
        if url:
            st.code(view_link(url), language=None, wrap_lines=True)
            if len(att.text) > LINK_TEXT_CHARS:
                st.caption("This text is too long for a link: the link keeps the view, the text must be pasted.")
        else:
            st.caption("The link is known once the page is open in a browser.")


def _comparison_of(a: weakref.ref, b: weakref.ref, comparison, label_a: str, label_b: str) -> bytes:
    """The comparison's file, built when clicked (both results held weakly, as _npz_of holds one)."""
    att_a, att_b = a(), b()
    if att_a is None or att_b is None:
        raise RuntimeError("these results are no longer cached: run the page again and save")
    return comparison_npz(att_a, att_b, comparison, label_a=label_a, label_b=label_b)


def comparison_button(att_a: ModelAttention, att_b: ModelAttention, comparison, label_a: str, label_b: str) -> None:
    """A download of the comparison and both results in one file, which Compare two models reopens without
    either model."""
    st.download_button("Save this comparison", functools.partial(_comparison_of, weakref.ref(att_a),
                                                                 weakref.ref(att_b), comparison, label_a, label_b),
                       file_name=f"{file_stem('compare', label_a, 'vs', label_b)}.npz",
                       mime="application/octet-stream", icon=":material/download:", on_click="ignore",
                       key="cmp.save", help="One .npz: both results (tokens, weights, model names) and every "
                       "head's distance. Open it above to see it again without either model; np.load reads it.")
