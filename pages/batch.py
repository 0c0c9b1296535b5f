"""A batch of prompts: the logit difference, each head's direct share of it and activation patching of the residual
stream over a data set of prompt pairs (clean, corrupted, target, foil), each prompt's value kept beside the mean
and its spread, as studies of indirect-object identification (IOI) measure them over hundreds of pairs."""

import hashlib

import streamlit as st

from attention import figures
from attention.models import (
    CORRUPTIONS,
    DEFAULT_DECODER,
    ModelChoice,
    batch_attribution,
    batch_job_bytes,
    batch_job_of,
    batch_patching,
    head_words,
    ioi_pairs,
    logit_differences,
    model_label,
    read_prompt_pairs,
    write_prompt_pairs,
)
from pages._canvas import canvas_heatmap
from pages._clicks import head_opener, open_head_buttons, picked_head
from pages._focus import changing, following, on_page
from pages._frame import ensure_app_frame
from pages._jobs import model_or_stop, result_of, result_or_none
from pages._kept import drawn, keep, keeping, kept
from pages._labels import label_of
from pages._path import intro, path_links, stop_here
from pages._prose import for_developers, prose
from pages._text import md
from pages._widgets import fit, layer_and_head, model_picker

ensure_app_frame()
SOURCES = {"ioi": "IOI template", "file": "a file of yours"}
DEFAULTS = {"batch.source": "ioi", "batch.n": 100, "batch.corruption": "abc", "batch.seed": 0}  # the preset: 100
# IOI pairs, ABC. The page's own choices, kept for the session (pages/_kept.py): they hold when the visitor follows
# a head to another page and comes back; an uploaded file is kept as its name and bytes ("batch.upload")
MAX_PAIRS = 500  # rows one run reads: a file's later rows are left out (and said so)
UPLOAD_MB = 5
TOP_HEADS = 10
SHOWN_ROWS = 8  # rows of the pairs' table visible before it scrolls
NUMBER = st.column_config.NumberColumn(format="%.3f")

st.title("A batch of prompts")
intro("pages/batch.py", "For researchers: what studies of indirect-object identification (IOI, Wang et al. 2022) "
      "measure over hundreds of prompt pairs. Each row is a **clean** prompt, its **corrupted** twin, the "
      "**target** the clean prompt should predict and a **foil**. For every prompt the page reads the logit "
      "difference m, each head's **direct share** of m, and how much of m comes back when the residual stream is "
      "patched from the clean run into the corrupted one; each prompt's value is kept, and the mean is shown with "
      "its spread.")
focus = on_page()

# --- The prompt pairs ------------------------------------------------------------------------------------------
c1, c2 = st.columns([2, 1])  # at 800 px a narrower column cut the model's name
name = model_picker(c2, focus, slot="batch", default=DEFAULT_DECODER)
source = c1.segmented_control("Prompt pairs", list(SOURCES), format_func=label_of(SOURCES),
                              key=drawn("batch.source", "batch.source", DEFAULTS["batch.source"]),
                              on_change=keeping("batch.source", "batch.source")) or "ioi"
loaded = model_or_stop(name)
if loaded.spec.architecture != "decoder-only":  # an encoder predicts no next token: there is no m to read
    st.info(f"{md(model_label(name))} predicts no next token: this page reads a prediction's logit difference. "
            "Choose a decoder.")
    st.button(f"Switch to {model_label(DEFAULT_DECODER)}", icon=":material/swap_horiz:", key="batch.decoder",
              on_click=changing(model=ModelChoice(DEFAULT_DECODER)))
    path_links("pages/batch.py")
    stop_here()

def _forget_a_removed_file() -> None:
    """The uploader's on_change: a file the visitor removed is no longer read (a new one is kept where it is read)."""
    if st.session_state.get("batch.file") is None:
        keep("batch.upload", None)


if source == "ioi":
    n_col, corruption_col, seed_col = c1.columns(3)
    n = n_col.number_input("Pairs", 2, MAX_PAIRS, step=10, key=drawn("batch.n", "batch.n", DEFAULTS["batch.n"]),
                           on_change=keeping("batch.n", "batch.n"),
                           help=f"How many prompt pairs to generate, {MAX_PAIRS} at most.")
    corruption = corruption_col.selectbox(
        "Corruption", list(CORRUPTIONS), format_func=str.upper,
        key=drawn("batch.corruption", "batch.corruption", DEFAULTS["batch.corruption"]),
        on_change=keeping("batch.corruption", "batch.corruption"),
        help=" ".join(f"{k.upper()}: {v}." for k, v in CORRUPTIONS.items()))
    seed = seed_col.number_input("Seed", 0, 10_000, key=drawn("batch.seed", "batch.seed", DEFAULTS["batch.seed"]),
                                 on_change=keeping("batch.seed", "batch.seed"),
                                 help="The generator's seed: the same seed gives the same pairs.")
    try:
        pairs = ioi_pairs(loaded.tokenizer, int(n), seed=int(seed), corruption=corruption)
    except ValueError as err:
        st.error(f"**The IOI template cannot be filled for {md(model_label(name))}.** {md(err)}")
        stop_here()
    st.caption(f"“When Mary and John went to the store, John gave a drink to” → “Mary”, not “John”: {len(pairs)} pairs "
               f"with names, place and object drawn at random. Corrupted: {md(pairs.corruption)}."
               + (f" Left out (not one token for this model): {md(', '.join(pairs.skipped))}." if pairs.skipped
                  else ""))
else:
    file = c1.file_uploader("A .jsonl or .csv file of prompt pairs", type=["jsonl", "csv"], key="batch.file",
                            on_change=_forget_a_removed_file,
                            max_upload_size=UPLOAD_MB,
                            help="One row per pair, with the columns clean, corrupted, target and foil (.csv: a "
                                 "header line; .jsonl: one JSON object per line). The target and the foil are the "
                                 "next tokens m compares, with their leading space: “ Mary”, “ John”. What the "
                                 "download button below writes reads back here.")
    if file is not None:  # kept: the uploader is empty again when the visitor comes back (removing the file forgets it)
        keep("batch.upload", (file.name, file.getvalue()))
    upload = kept("batch.upload")
    if file is None and upload is not None:
        c1.caption(f"Reading {md(upload[0])}, uploaded earlier in this visit: upload another file to replace it.")
    if upload is None:
        st.info("Upload a file of prompt pairs, or download the IOI pairs (choose “IOI template” above) to see "
                "the format.")
        path_links("pages/batch.py")
        stop_here()
    try:
        pairs = read_prompt_pairs(*upload)
    except ValueError as err:
        st.error(f"**{md(upload[0])} cannot be read.** {md(err)}")
        path_links("pages/batch.py")
        stop_here()
    if len(pairs) > MAX_PAIRS:
        st.warning(f"{md(upload[0])} holds {len(pairs):,} pairs: the first {MAX_PAIRS} are read.")
        pairs = pairs[:MAX_PAIRS]
    st.caption(f"{len(pairs)} pairs read from {md(pairs.source)}.")

digest = hashlib.sha256(write_prompt_pairs(pairs).encode()).hexdigest()[:16]  # which pairs, for this session's keys
st.dataframe([{"target": r.target, "foil": r.foil, "clean": r.clean, "corrupted": r.corrupted} for r in pairs],
             hide_index=True, key="batch.pairs", height=min(40 + 35 * len(pairs), 40 + 35 * SHOWN_ROWS),
             column_config={"target": st.column_config.TextColumn(width="small"),  # short: first, never scrolled off
                            "foil": st.column_config.TextColumn(width="small"),
                            "clean": st.column_config.TextColumn(width="large"),
                            "corrupted": st.column_config.TextColumn(width="large")})
st.download_button("Download these pairs (.jsonl)", data=write_prompt_pairs(pairs), on_click="ignore",
                   file_name="ioi-pairs.jsonl" if source == "ioi" else f"{pairs.source.rsplit('.', 1)[0]}.jsonl",
                   icon=":material/download:", key="batch.download", mime="application/jsonl",
                   help="The rows as JSON lines (clean, corrupted, target, foil): they open here again, and in a "
                        "notebook with read_prompt_pairs.")

# --- 1. The logit difference -----------------------------------------------------------------------------------
st.header("1 · The logit difference on every prompt")
st.latex(r"m = \text{logit}(\text{target}) - \text{logit}(\text{foil})")
m_of = result_of(logit_differences, f"Reading m on {len(pairs)} clean and corrupted prompts…", loaded, pairs)
st.dataframe(figures.m_rows(m_of), hide_index=True, key="batch.m",
             column_config={c: NUMBER for c in ("mean", "std", "min", "max")})
st.metric("Prefers the target", f"{m_of.accuracy:.0%}", help="The share of clean prompts on which m > 0: the model "
          "gives the target a higher logit than the foil.")  # on a line of its own: beside the table, cut at 800 px
st.plotly_chart(figures.prompt_strip({"clean": m_of.clean, "corrupted": m_of.corrupted},
                                     [r.clean for r in pairs], title=f"m on each of {len(pairs)} prompts",
                                     x_title="m (logits)"),
                width="stretch", key="batch.m_strip")
st.caption("One point per prompt (hover: the clean prompt); the diamond is the mean, its bar one standard deviation "
           "either side. A positive m means the model prefers the target.")

# --- 2. Direct attribution -------------------------------------------------------------------------------------
st.header("2 · Which heads write it: direct attribution")
st.latex(r"\text{share}(h) = N_{\text{frozen}}(z_h W_O^h)\cdot\big(W_U[\text{target}] - W_U[\text{foil}]\big)")
dla = result_or_none(batch_attribution, f"Reading every head's share on {len(pairs)} prompts…", loaded, pairs,
                     needs=("direct attribution",))
if dla is not None:
    prose("Each head's output at the last token, read straight through the final norm (its scale frozen at each "
          "prompt's own final stream) into the target's logit minus the foil's. Per prompt the shares of every "
          "head, MLP, the embeddings and the biases add up to the model's own m.")
    _, n_layers, n_heads = dla.heads.shape
    focus = fit(n_layers=n_layers, n_heads=n_heads)
    top = dla.top_heads(TOP_HEADS)
    table_key = f"batch.heads.{focus.layer}.{focus.head}"  # a new table once another head is open: no stale tick
    focus = picked_head(table_key, [tuple(h) for h, _ in top])  # a row ticked in the table drawn last run
    focus = following(focus, *top[0][0])  # else the head of largest mean share opens below
    canvas_heatmap(figures.attribution_canvas(dla, click_text="click to open this head below"), key="batch.direct",
                   on_click=head_opener("batch.direct"))
    st.dataframe(figures.head_rows(dla, TOP_HEADS), hide_index=True, key=table_key, on_select="rerun",
                 selection_mode="single-row",
                 column_config={**{c: NUMBER for c in ("mean", "std", "min", "max")},
                                "towards the target": st.column_config.NumberColumn(format="percent")})
    st.caption(f"The {TOP_HEADS} heads of largest mean share (in either direction), with the spread over the "
               f"{len(pairs)} prompts; “towards the target”: the share of prompts on which the head raises m. Tick a "
               f"row, or click a cell above, to open that head below. The parts add up to the model's m within "
               f"{figures.parts_gap(dla):.1e} on every prompt.")
    st.subheader("One head on every prompt")
    c1, c2, c3 = st.columns([1, 1, 2])
    layer, head = layer_and_head(c1, c2, focus, n_layers, n_heads, slot="batch")
    spread = dla.spread("heads")
    c3.markdown(f"{head_words(layer, head).capitalize()}: mean share {spread.mean[layer, head]:+.3f} (std "
                f"{spread.std[layer, head]:.3f}, min {spread.min[layer, head]:+.3f}, max {spread.max[layer, head]:+.3f}"
                ") over the prompts.")
    shown = figures.head_name(layer, head)
    st.plotly_chart(figures.prompt_strip({shown: dla.heads[:, layer, head]}, [r.clean for r in pairs],
                                         title=f"{shown}'s direct share of m, prompt by prompt",
                                         x_title="share of m (logits)"),
                    width="stretch", key="batch.head_strip")
    open_head_buttons(layer, head, key="batch.open", source=name, text=pairs[0].clean)
    st.caption("The buttons open this head on the first clean prompt.")

# --- 3. Activation patching ------------------------------------------------------------------------------------
st.header("3 · Where it enters: activation patching")
st.latex(r"\text{recovery} = \frac{m_{\text{patched}} - m_{\text{corrupt}}}{m_{\text{clean}} - m_{\text{corrupt}}}")
prose("Each corrupted prompt runs again with its residual stream at one layer and position taken from its clean "
      "twin: 1 brings the clean m back, 0 changes nothing. Where every prompt has one length, every stream is patched "
      "at every position from the first where a pair differs; where the lengths differ, positions do not line up "
      "across prompts and each prompt's last token alone is patched. One run per prompt each, so this takes much "
      "longer than the rest of the page: a bar shows how far it got, and the work goes on if you change something "
      "meanwhile.")
asked = f"batch.patched.{name.name}@{name.dtype}.{digest}"  # this session asked for these pairs' patching
patched = None
if st.button("Run patching", icon=":material/healing:", key="batch.patch", type="primary") or \
        st.session_state.get(asked):
    st.session_state[asked] = True
    patched = result_or_none(batch_patching, f"Patching the residual stream of {len(pairs)} prompts…", loaded,
                             pairs, needs=("hook points",))
    if patched is not None:
        canvas_heatmap(figures.patching_canvas(patched), key="batch.patching")
        counted = figures.counted_prompts(patched)
        every = patched.positions != (-1,)
        st.caption(("Columns: each position, counted from 0, as every prompt has it (the prompts have one length); "
                    "IO, S1, S2: the target's and the foil's places, where the names differ from prompt to prompt."
                    if every else "The prompts have different lengths: only each one's last token is patched.")
                   + f" Rows: the stream entering each layer, then the final one. {counted} of {len(pairs)} prompts "
                   "count: a prompt whose m is the same clean and corrupted has nothing to restore. "
                   f"{patched.runs:,} patched runs in {patched.seconds:.0f} s.")
        st.dataframe(figures.patching_rows(patched), hide_index=True, key="batch.patch_cells",
                     column_config={c: NUMBER for c in ("mean", "std", "min", "max")})
        st.caption("Each position where patching changes m: the streams whose mean recovery is half or more (from "
                   "the first to the last of them), and the stream that restores most there, with its spread over "
                   "the prompts.")
else:
    st.info("Patching runs only when asked: press **Run patching**.")

if dla is not None or patched is not None:  # every prompt's values, for a notebook: what the command's jobs save
    saved = f"batch.values.{name.name}@{name.dtype}.{digest}.{patched is not None}"  # made once a session, not a rerun
    if saved not in st.session_state:
        st.session_state[saved] = batch_job_bytes(batch_job_of(loaded, pairs, dla, patched))
    st.download_button("Download every prompt's values (.safetensors)", on_click="ignore", key="batch.values",
                       data=st.session_state[saved], icon=":material/download:",
                       file_name=f"batch-{name.name}-{len(pairs)}-pairs.safetensors",
                       mime="application/octet-stream",
                       help="The pairs, each prompt's direct shares" + (" and its patching" if patched else "")
                            + ": attention.models.load_batch_job(path) reads them in a notebook, as it reads what "
                            "the command attention-explorer batch saves.")

for_developers("The pairs: attention.models.ioi_pairs (or read_prompt_pairs for a file; write_prompt_pairs writes "
               "what the download holds). The numbers: logit_differences, batch_attribution and batch_patching "
               "(attention/models/analyses/batch.py, batch_patching.py); the figures and tables: "
               "attention.figures.m_rows, prompt_strip, attribution_canvas, head_rows, patching_canvas and "
               "patching_rows, which examples/ioi.ipynb can draw too.")
path_links("pages/batch.py")
