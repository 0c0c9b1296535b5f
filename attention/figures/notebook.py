"""The app's canvas heatmaps in a notebook, in a page exported from it and on a code host, from one output each.

`NotebookHeatmap(payload)` wraps any CanvasHeatmap (attention.figures.canvas); `notebook_heatmap(att)` (every
layer x head), `notebook_heatmap(att, 2, 5)` (one head) and `notebook_heatmap(att, token=6)` (one token in every
head) make one from a result (attention.figures.notebook_results). This module needs numpy and Pillow, not torch.
Shown as a cell's output, it is one MIME bundle that each medium reads its own way:

    text/html   the app's own heatmap.js and heatmap.css inline, the payload's two binary arrays (colour indices,
                float32 values) as base64, and the PNG below as an <img> that the script replaces by the live
                chart (hover, zoom, keyboard, PNG button) wherever an output's scripts run: a trusted notebook in
                JupyterLab or Notebook 7, VS Code, Colab, and the page nbconvert exports (it keeps text/html
                outputs and their scripts; the charts draw there offline). Where no script runs (JupyterLab
                sanitises an untrusted notebook's HTML but keeps data: images), the <img> stays.
    image/png   the same picture drawn in Python (attention.figures.png), for what shows images but runs no
                script: a code host's notebook preview, a converter to PDF or Markdown.
    text/plain  what the chart is, and how to save it.

    view.to_html("heads.html")  a standalone page: opens from file:// with no server and no network
    view.to_png("heads.png")    the labelled picture (labels=False: the cells alone, `scale` px each)
    view.to_svg("heads.svg")    the same picture in vectors, for a paper (to_pdf: a vector PDF of it)

Not an ipywidget (anywidget): a widget's view needs a live kernel or saved widget state plus its manager script
from a CDN, so it shows nothing in an offline export nor on a code host, and it would add ipywidgets and its
Jupyter extensions to the install. Nothing goes back to Python: a click only opens the tip.

What a call costs, in bytes of the notebook's output (MiniLM, 6 layers x 12 heads, "I sat on the bank of the
river": 8 words, 10 tokens; tests/test_widget.py checks the bounds):

    BertViz's head_view(..., html_action="return")   4,987 kB   plotly.js inline in every call (model_view: 4,889 kB)
    notebook_heatmap(att), every head: text/html       105 kB   heatmap.js + .css 21 kB, the arrays 64 kB as base64
                                                                 (65 x 131 cells), the fallback PNG 19 kB as base64
                                       image/png        19 kB   as base64 (14 kB of PNG, 629 x 328 px, a palette)
    notebook_heatmap(att, 2, 5), one head: text/html    35 kB   (image/png 7 kB)
    notebook_heatmap(att, token=6): text/html           45 kB   (image/png 11 kB)
    to_html(path): every head / one head            87 / 28 kB   (no PNG inside: a browser opens it)

heatmap.js is shipped in every output, not once per notebook: an output must draw alone (an exported page keeps
some outputs, Colab gives each its own frame, a cleared cell must not break a later one), and 21 kB is 0.4 % of
what head_view sends.

User text (tokens, titles) travels inside the base64 payload and reaches the page only as textContent or canvas
text (heatmap.js); what this module writes into HTML itself (the <img>'s alt, the page's <title>) is escaped.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from uuid import uuid4

from attention.figures.canvas import CanvasHeatmap, source
from attention.figures.png import heatmap_png

__all__ = ["NotebookHeatmap"]

# Mounts heatmap.js (its `export default` made the inner function's return value) on the box with this id,
# then drops the fallback picture; if anything fails, the picture stays.
_MOUNT = """(function (box, payload) {
  "use strict";
  const mount = (function () {
%s
  })();
  const host = document.getElementById(box);
  if (!host) return;
  const still = host.firstElementChild, holder = document.createElement("div");
  try {
    host.appendChild(holder);
    mount({ data: Uint8Array.from(atob(payload), (c) => c.charCodeAt(0)), parentElement: holder,
            setTriggerValue: () => {} });
    if (still && still.tagName === "IMG") still.remove();
  } catch (err) {
    holder.remove();
    console.error("attention heatmap:", err);
  }
})(%s, %s);"""


@cache
def _script() -> str:
    """heatmap.js as a function body: its one `export default` becomes `return`. Refuses a source that would
    close the <script> element early."""
    js = source("js")
    body, n = re.subn(r"^export default function", "return function", js, flags=re.M)
    if n != 1 or re.search(r"</script", body, re.I) or re.search(r"</style", source("css"), re.I):
        raise ValueError("heatmap.js must have one `export default function` and neither file a closing tag")
    return body


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass(frozen=True, eq=False)
class NotebookHeatmap:
    """A CanvasHeatmap for a notebook or a file: shown as a cell's output, saved with to_html or to_png."""

    payload: CanvasHeatmap
    scale: int | None = None  # the PNG's pixels per cell (None: attention.figures.png.auto_scale)

    def __post_init__(self):
        if not isinstance(self.payload, CanvasHeatmap):
            raise TypeError(f"NotebookHeatmap draws what a figure builder made (figures.matrix_canvas, "
                            f"layer_head_canvas, ...), not a {type(self.payload).__name__}: for an array, "
                            "figures.notebook_heatmap(array) draws it")

    @property
    def name(self) -> str:
        """What the chart shows, in words (its title, else the title a saved picture gets)."""
        return self.payload.title or self.payload.export_title or "attention heatmap"

    def png(self, *, labels: bool = True) -> bytes:
        """The picture as PNG bytes; labels=False: the cells alone, (rows * scale) x (cols * scale) px."""
        return heatmap_png(self.payload, scale=self.scale, labels=labels)

    def html(self, *, fallback: bool = True) -> str:
        """The HTML fragment a notebook shows: a box, the CSS, one script; with `fallback`, the PNG inside the box
        until the script replaces it (where no script runs, it stays)."""
        return self._fragment(self.png() if fallback else None)

    def _fragment(self, picture: bytes | None) -> str:
        box = f"aeh-{uuid4().hex}"
        still = "" if picture is None else (f'<img alt="{html.escape(self.name, quote=True)}" style="max-width:100%" '
                                            f'src="data:image/png;base64,{_b64(picture)}">')
        script = _MOUNT % (_script(), f'"{box}"', f'"{_b64(self.payload.to_bytes())}"')  # id and base64: no quotes
        return (f'<div id="{box}" class="aeh-notebook" style="width:100%">{still}</div>'
                f'<style>{source("css")}</style><script>\n{script}\n</script>')

    def page(self) -> str:
        """A standalone HTML document: everything inline, so it opens from file:// with no server or network."""
        return ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f'<title>{html.escape(self.name)}</title></head>\n'
                f'<body style="margin:16px;max-width:1100px">{self.html(fallback=False)}</body></html>\n')

    def to_html(self, path: str | Path) -> Path:
        """Writes page() to `path` (UTF-8) and returns the path."""
        path = Path(path)
        path.write_text(self.page(), encoding="utf-8")
        return path

    def to_png(self, path: str | Path, *, labels: bool = True) -> Path:
        """Writes png(labels=labels) to `path` and returns the path."""
        path = Path(path)
        path.write_bytes(self.png(labels=labels))
        return path

    def svg(self) -> str:
        """The picture as an SVG document (attention.figures.svg): vectors, for a paper."""
        from attention.figures.svg import heatmap_svg

        return heatmap_svg(self.payload, scale=self.scale)

    def to_svg(self, path: str | Path) -> Path:
        """Writes svg() to `path` and returns the path."""
        path = Path(path)
        path.write_text(self.svg(), encoding="utf-8")
        return path

    def to_pdf(self, path: str | Path) -> Path:
        """Writes the SVG as a vector PDF (CairoSVG, the [figures] extra: attention.figures.paper says what it
        needs) and returns the path."""
        from attention.figures.paper import write_figure

        return write_figure(self, Path(path).with_suffix(".pdf"))

    def __repr__(self) -> str:
        rows, cols = self.payload.shape
        return f"NotebookHeatmap({self.name!r}, {rows} x {cols} cells; .to_html(path), .to_png(path), .to_svg(path))"

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """text/html for notebooks and exported pages, image/png for what runs no script, text/plain."""
        wanted = lambda mime: (not include or mime in include) and not (exclude and mime in exclude)  # noqa: E731
        bundle, picture = {"text/plain": repr(self)}, self.png()  # one picture: the HTML's fallback and image/png
        if wanted("text/html"):
            bundle["text/html"] = self._fragment(picture)
        if wanted("image/png"):
            bundle["image/png"] = _b64(picture)
        return bundle
