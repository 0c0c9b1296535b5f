"""Attention in an image model: a vision transformer's heads over the patches of a picture."""

import hashlib

import streamlit as st

from attention import figures
from attention.models import (
    DEFAULT_IMAGE_MODEL,
    HIGH_NORM_FACTOR,
    IMAGE_FORMATS,
    MAX_IMAGE_BYTES,
    ModelChoice,
    attend_image,
    attention_rollout,
    example_images,
    heads_looking,
    high_norm_tokens,
    image_models,
    model_label,
    patch_looks,
)
from pages._export import chart_config
from pages._frame import ensure_app_frame
from pages._jobs import model_or_stop, result_of
from pages._kept import drawn, keep, keeping, kept
from pages._path import intro, path_links, stop_here
from pages._prose import prose
from pages._text import md

PAGE = "pages/image_model.py"
PICTURE = "image.picture"  # the clickable picture's chart key, followed by its query token's name

ensure_app_frame()
st.title("Attention in an image model")
intro(PAGE, "A vision transformer cuts an image into a grid of square patches and reads each patch as one token "
      "(here a token is a patch of pixels, not a piece of text), "
      "with a few tokens of its own in front: **[CLS]**, the summary its classifier reads, and in some models "
      "**registers**, spare tokens with no place on the image. Its heads are the heads of a text model, over "
      "patches instead of words: every query patch asks which patches to look at. Click a patch to see where it "
      "looks.")

# --- the model and the image ---------------------------------------------------------------------------------
models = image_models()
col_model, col_image = st.columns([1, 2])
if kept("image.model", DEFAULT_IMAGE_MODEL) not in models:  # an operator's folder gone since
    keep("image.model", DEFAULT_IMAGE_MODEL)
name = col_model.selectbox("Image model", list(models), key=drawn("image.model", "image.model", DEFAULT_IMAGE_MODEL),
                           format_func=models.get, on_change=keeping("image.model", "image.model"),
                           help="The bundled digits model runs offline. The others load from the Hugging Face hub, "
                                "where this server is online and allows them, or from the folders its operator "
                                "lists.")
choice = ModelChoice(name, "auto")
examples = example_images()
sources = ["A held-out test digit", "My own image"]
source = col_image.radio("Image", sources, horizontal=True, key=drawn("image.source", "image.source", sources[0]),
                         on_change=keeping("image.source", "image.source"))
picked = None
if source == sources[0]:
    labels = dict(enumerate(examples.names))
    index = col_image.selectbox("Test digit", list(labels), format_func=labels.get,
                                key=drawn("image.example", "image.example", 0),
                                on_change=keeping("image.example", "image.example"),
                                help=f"{md(examples.about)}")
    picked, image_name, digest = examples.images[index], examples.names[index], f"example {index}"
else:
    formats = ", ".join(f.lower() for f in IMAGE_FORMATS)
    upload = col_image.file_uploader(
        "Your image", type=["png", "jpg", "jpeg", "gif", "bmp", "webp"], key="image.upload",
        help=f"{formats}; up to {MAX_IMAGE_BYTES / 1e6:.0f} MB and 40 million pixels (larger files are refused). It "
             "is read on this server and nowhere else. The digits model knows only 8 × 8 white digits on black: "
             "it shrinks any picture to that and reads it as one of 0–9.")
    if upload is None:
        st.info("Upload an image above, or pick a held-out test digit.")
        stop_here()
    data = upload.getvalue()
    picked, image_name, digest = data, upload.name, hashlib.sha256(data).hexdigest()[:16]

loaded = model_or_stop(choice)
att = result_of(attend_image, f"Running {model_label(name)}…", loaded, picked,
                name=image_name)
grid = att.image
if loaded.check is not None:
    st.caption(f"{md(model_label(name))} · {loaded.check.short}",
               help=f"The {md(loaded.check.summary)}. Every number on this page is computed from what the model "
                    "computes.")
    if loaded.check.note:
        st.info(md(loaded.check.note))
said = grid.predicted
if said is not None:
    label, p = said
    accuracy = f" It reads {examples.accuracy:.1%} of the held-out digits right." if (
        name == DEFAULT_IMAGE_MODEL and examples.accuracy is not None) else ""
    misread = " It is one of the digits the model gets wrong." if (
        name == DEFAULT_IMAGE_MODEL and source == sources[0] and examples.labels[index] != label) else ""
    st.markdown(f"**The model reads this image as “{md(label)}”** ({p:.0%} of its probability).{accuracy}{misread}")
    if name == DEFAULT_IMAGE_MODEL and source != sources[0]:
        st.caption("This model knows only 8 × 8 white digits on black: it reads any picture as one of 0–9.")

# --- layer, head, query ----------------------------------------------------------------------------------------
# The widgets are keyed by model and image: a run that stopped before drawing them (an upload awaited, a model
# that failed) drops their state, and a widget drawn again under its old key showed its default while the page
# used the kept value. Their values are kept per model (pages/_kept.py), whatever the image.
here = f"{name}.{digest}"
tokens = att.tokens
n_layers, n_heads = att.n_layers, att.n_heads
col_layer, col_head, col_query = st.columns(3)
layer = col_layer.number_input(f"Layer (1–{n_layers})", 1, n_layers, key=drawn(
    f"image.layer.{here}", f"image.layer.{name}", n_layers),
    on_change=keeping(f"image.layer.{here}", f"image.layer.{name}")) - 1
heads = ["mean of the heads", *(f"head {h + 1}" for h in range(n_heads))]
head_label = col_head.selectbox("Head", heads, key=drawn(f"image.head.{here}", f"image.head.{name}", heads[1]),
                                on_change=keeping(f"image.head.{here}", f"image.head.{name}"))
head = None if head_label == heads[0] else heads.index(head_label) - 1
default_query = grid.token_of(grid.rows // 2, grid.cols // 2)
if kept(f"image.query.{name}") not in tokens:  # another image size: another grid
    keep(f"image.query.{name}", tokens[default_query])
clicked = st.session_state.get(f"{PICTURE}.{here}.{kept(f'image.query.{name}')}")  # the last run's picture
points = clicked["selection"]["points"] if clicked else []
if points:  # a click on a patch makes it the query (the next picture, keyed by it, starts with nothing clicked)
    row, col = grid.patch_at(points[0]["x"], points[0]["y"])
    keep(f"image.query.{name}", f"patch ({row + 1}, {col + 1})")
query_name = col_query.selectbox("Query token (or click a patch)", tokens,
                                 key=drawn(f"image.query.{here}", f"image.query.{name}", tokens[default_query]),
                                 on_change=keeping(f"image.query.{here}", f"image.query.{name}"))
query = tokens.index(query_name)


looks = patch_looks(att, layer, head, query)
who = "the mean of the heads" if head is None else f"head {head + 1}"
short = "mean of heads" if head is None else f"head {head + 1}"
col_plain, col_heat = st.columns([2, 3])
col_plain.plotly_chart(figures.picture(att, title="What the model read", selected=grid.patch_of(query),
                                       height=340), config=chart_config(name, "image"))
title = f"Where {query_name} looks\nlayer {layer + 1}, {short}"
col_heat.plotly_chart(figures.picture(att, looks.on_image, title=title,
                                      selected=grid.patch_of(query), clickable=True, height=480),
                      key=f"{PICTURE}.{here}.{query_name}", on_select="rerun", selection_mode="points",
                      config=chart_config(name, "image", f"layer {layer + 1}", who, query_name))
(top_row, top_col), top = looks.top
prose(f"The picture is what the model read: {grid.rows} × {grid.cols} patches of {grid.patch} × {grid.patch} "
      "pixels, after its own processor resized it (on the left; faded under the colours on the right). The "
      f"redder a patch, the more of **{md(query_name)}**'s attention weight it gets in {who} of layer "
      f"{layer + 1}: the most, {top:.1%}, goes to patch ({top_row + 1}, {top_col + 1}).")
if grid.prefix:
    st.markdown(f"**{looks.prefix_share:.1%}** of its weight goes to tokens that are not on the picture "
                f"({md(', '.join(grid.prefix))}). A row sums to 1 over every token it sees: the patches and those.")

# --- every head at once ----------------------------------------------------------------------------------------
st.subheader(f"Every head of layer {layer + 1} at once")
st.caption(f"Where {md(query_name)} looks in each head; each panel on its own colour scale, so a faint head "
           "still shows its pattern. Hover for the weights.")
st.plotly_chart(figures.heads_over_image(att, heads_looking(att, layer, query), columns=min(6, n_heads),
                                         selected=grid.patch_of(query)),
                config=chart_config(name, "image", "heads", f"layer {layer + 1}", query_name))

# --- [CLS] and rollout ------------------------------------------------------------------------------------------
col_cls, col_roll = st.columns(2)
with col_cls:
    st.subheader("What [CLS] looks at")
    if grid.prefix and grid.prefix[0] == "[CLS]":
        cls = patch_looks(att, layer, head, 0)
        st.plotly_chart(figures.picture(att, cls.on_image, title=f"[CLS] · layer {layer + 1}\n{short}", height=360),
                        config=chart_config(name, "image", "cls", f"layer {layer + 1}", who))
        st.caption(f"The classifier reads [CLS] after the last layer; here it gives {cls.prefix_share:.1%} of its "
                   "weight to the tokens in front (itself included).")
    else:
        st.info(f"{md(model_label(name))} has no [CLS] token: it pools its patches instead.")
with col_roll:
    st.subheader("Attention rollout")
    rolled = result_of(attention_rollout, "Rolling attention out…", att)[layer]
    st.plotly_chart(figures.picture(att, grid.on_grid(rolled[query]), value_name="rollout", height=360,
                                    title=f"Rollout of {query_name}\n" + (
                                        "layer 1" if layer == 0 else f"layers 1–{layer + 1}")),
                    config=chart_config(name, "image", "rollout", f"layer {layer + 1}", query_name))
    st.caption("Abnar and Zuidema (2020): each layer's weights averaged over its heads, half of each token kept "
               "for the residual stream, and the layers multiplied. Read it with care: it treats heads as equal, "
               "ignores what the values carry, the MLPs and the norms, assumes the residual carries exactly half, "
               "and says nothing about any one class.")

# --- high-norm tokens and registers ------------------------------------------------------------------------------
st.subheader("High-norm tokens and registers")
high = high_norm_tokens(att, layer)
st.plotly_chart(figures.norms_chart(att, layer), config=chart_config(name, "image", "norms", f"layer {layer + 1}"))
st.caption("Blue: [CLS] and registers; grey: patches; red: a high-norm token. Hover a bar for its token.")
found = ", ".join(tokens[i] for i in high) if len(high) else "none"
prose(f"Darcet et al. (2024) found that large vision transformers turn a few background patches into scratch "
      f"space: their hidden states grow far larger than the others' (here: over {HIGH_NORM_FACTOR:g} × the median "
      "patch's), and many heads look at them, as text models' heads look at a sink token. Spare tokens with no "
      "place on the image, **registers**, take that role over (DINOv2 with registers). After layer "
      f"{layer + 1} of this model, high-norm tokens: **{md(found)}**.")

path_links(PAGE)
