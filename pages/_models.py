"""What the model pages share: the model picker, cached loading and attention, and friendly errors.

Models are cached once per process with st.cache_resource (LoadedModel serialises its forward passes
with a lock, so sessions can share it). Attention per (model, text) is cached with st.cache_resource
too, not st.cache_data: a 512-token MiniLM result is ~95 MB, and cache_data would keep it pickled and
unpickle a fresh copy on every rerun (every click on the page). ModelAttention's arrays are read-only,
so one shared copy is safe; max_entries bounds the memory (benchmarks: peak RSS target 1.5 GB).
"""

import streamlit as st

from attention.models import BUNDLED, ModelAttention, ModelUnavailable, hub_allowlist, load_model
from pages._text import md

OTHER = "other (Hugging Face id)…"
DEFAULT_TEXT = "I sat on the river bank and watched the water."


def model_label(name: str) -> str:
    """What the model picker shows, and so what ?model= holds in a URL: "minilm" -> its label."""
    return BUNDLED[name].label if name in BUNDLED else name


def model_query(name: str) -> dict[str, str]:
    """The query parameters that make pick_model() choose `name` (a bundled model or a hub id)."""
    return {"model": model_label(name)} if name in BUNDLED else {"model": OTHER, "hub_id": name}


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_model(name: str):
    return load_model(name)


@st.cache_resource(max_entries=4, show_spinner=False)
def cached_attention(name: str, text: str, target: str | None = None) -> ModelAttention:
    return cached_model(name).attend(text, target=target)


def pick_model(col=st) -> str:
    """The model selectbox (bundled models, or an allowlisted hub id typed in)."""
    options = list(BUNDLED) + [OTHER]
    choice = col.selectbox("Model", options, key="model", bind="query-params", format_func=model_label)
    if choice != OTHER:
        return choice
    return col.text_input("Hugging Face model id", value="bert-base-uncased", key="hub_id", bind="query-params",
                          max_chars=100, help="Allowed here: " + ", ".join(hub_allowlist()))


def sentence_and_model(default: str = DEFAULT_TEXT) -> tuple[str, str]:
    """The sentence box and, beside it, the model picker (both kept in the URL). Returns (model, text)."""
    c1, c2 = st.columns([3, 1])
    text = c1.text_area("Sentence", value=default, key="text", bind="query-params", max_chars=20_000, height=80)
    return pick_model(c2), text


def attention_or_stop(name: str, text: str, target: str | None = None) -> ModelAttention:
    """Load the model and run it, with a spinner that says what is happening; errors end the page cleanly."""
    label = model_label(name)
    first = "" if name != "smollm2" else " (the very first time converts the bundled file: ~20 s)"
    try:
        with st.spinner(f"Loading {label}{first} and computing attention…"):
            att = cached_attention(name, text, target)
    except ModelUnavailable as err:
        st.error(f"**Model unavailable.** {md(err)}")
        st.stop()
    except ValueError as err:
        st.warning(md(err))
        st.stop()
    if att.truncated:
        st.warning(f"The text has {att.n_input_tokens} tokens; {label} reads at most {len(att.tokens)}, "
                   "so only the beginning is shown.")
    return att


def token_label(att: ModelAttention, i: int) -> str:
    return f"{i}: {att.tokens[i]}"
