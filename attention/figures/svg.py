"""A canvas heatmap (attention.figures.canvas.CanvasHeatmap) as SVG, written in Python: a figure for a paper, with
no browser, no Kaleido and no network (issue 72). The picture is attention.figures.png's, in vectors: the same
geometry (png.frame), the cells as rectangles in the payload's own palette (each cell's colour is the one heatmap.js
gives it), the title, axis labels and colour bar as text a reader can select and an editor can restyle.

    heatmap_svg(payload)           the SVG document, as text
    NotebookHeatmap(...).to_svg()  the same, written to a file (attention.figures.notebook)

Above MAX_VECTOR_CELLS cells the cells are one embedded PNG (one pixel block per cell, as heatmap_png(labels=False)
draws them) inside the same vector frame: 262,144 rectangles would make a 20 MB file that editors choke on. Every
string from the payload (tokens, titles) is escaped as XML text.
"""

from __future__ import annotations

import base64
from xml.sax.saxutils import escape

import numpy as np

from attention.figures.canvas import NO_COLOUR, CanvasHeatmap
from attention.figures.png import BAR, GAP, TEXT, _cut, _x_labels, _y_labels, auto_scale, frame, heatmap_png

MAX_VECTOR_CELLS = 40_000  # cells drawn as rectangles at most; more: one embedded PNG of the cells
FONT = "DejaVu Sans, Arial, Helvetica, sans-serif"
_INK = "#{:02x}{:02x}{:02x}".format(*TEXT)


def heatmap_svg(payload: CanvasHeatmap, *, scale: int | None = None) -> str:
    """The payload as an SVG document (UTF-8 text): cells, thin borders where cells are big, window lines,
    title, axis labels and titles, colour bar. `scale`: px per cell (default auto_scale, as the PNG)."""
    scale = scale or auto_scale(payload)
    f = frame(payload, scale)
    rows, cols = payload.shape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{f.width}" height="{f.height}" '
           f'viewBox="0 0 {f.width} {f.height}" font-family="{FONT}" font-size="12">',
           f"<title>{escape(payload.title or payload.export_title or 'attention heatmap')}</title>",
           f'<rect width="{f.width}" height="{f.height}" fill="#ffffff"/>']
    out += _cells(payload, f.left, f.top, scale)
    if payload.tiles is None and scale >= 12:  # thin white borders between cells, as heatmap.js draws them
        for c in range(1, cols):
            out.append(_line(f.left + c * scale, f.top, f.left + c * scale, f.top + rows * scale, "#ffffff"))
        for r in range(1, rows):
            out.append(_line(f.left, f.top + r * scale, f.left + cols * scale, f.top + r * scale, "#ffffff"))
    if heading := payload.title or payload.export_title:
        out.append(_text(8, 13, _cut(heading, 120), size=15, anchor="start", baseline="middle"))
    for pos, text in _y_labels(payload, scale):
        out.append(_text(f.left - GAP, f.top + (pos + 0.5) * scale, text, anchor="end", baseline="middle"))
    xs, upright = _x_labels(payload, scale)
    below = f.top + rows * scale + GAP
    for pos, text in xs:
        x = f.left + (pos + 0.5) * scale
        if payload.x_top:
            out.append(_text(x, f.top - GAP, text, anchor="middle", baseline="auto"))
        elif upright:  # read bottom to top, its start just under the cells
            out.append(_text(x, below, text, anchor="end", baseline="middle", turn=True))
        else:
            out.append(_text(x, below, text, anchor="middle", baseline="hanging"))
    centre = f.left + cols * scale / 2
    out.append(_text(centre, f.top - 34 if payload.x_top else f.height - 4, payload.x_title, anchor="middle",
                     baseline="hanging" if payload.x_top else "auto"))
    if payload.y_title:
        title = _cut(payload.y_title, 60)
        out.append(_text(10, f.top + rows * scale / 2, title, anchor="middle", baseline="middle", turn=True))
    out += _colour_bar(payload, f.left + cols * scale + 14, f.top, rows * scale)
    out += _lines(payload, f.left, f.top, scale)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _cells(payload: CanvasHeatmap, left: int, top: int, scale: int) -> list[str]:
    """The cells: a rectangle each (runs of one colour along a row merged), or one embedded PNG when many."""
    rows, cols = payload.shape
    if rows * cols > MAX_VECTOR_CELLS:
        cells = base64.b64encode(heatmap_png(payload, scale=scale, labels=False)).decode("ascii")
        return [f'<image x="{left}" y="{top}" width="{cols * scale}" height="{rows * scale}" '
                f'style="image-rendering:pixelated" href="data:image/png;base64,{cells}"/>']
    colour = np.asarray(payload.colour)
    out = []
    for r in range(rows):
        c = 0
        while c < cols:
            index, end = int(colour[r, c]), c + 1
            while end < cols and int(colour[r, end]) == index:
                end += 1
            fill = payload.background if index == NO_COLOUR else payload.palette[index]
            out.append(f'<rect x="{left + c * scale}" y="{top + r * scale}" width="{(end - c) * scale}" '
                       f'height="{scale}" fill="{fill}"/>')
            c = end
    return out


def _colour_bar(payload: CanvasHeatmap, x: float, y: float, cells_height: int) -> list[str]:
    """The palette's steps bottom to top, labelled where Python said, the value's name below (as heatmap.js)."""
    height = max(40, min(cells_height, 320))
    steps = len(payload.palette)
    out = [f'<rect x="{x}" y="{y + height - (i + 1) * height / steps:.2f}" width="{BAR}" '
           f'height="{height / steps + 0.5:.2f}" fill="{colour}"/>' for i, colour in enumerate(payload.palette)]
    out += [_text(x + BAR + 4, y + height - pos * height, label, anchor="start", baseline="middle")
            for pos, label in payload.colorbar]
    out.append(_text(x - 2, y + height + 17, payload.value_name, anchor="start", baseline="middle"))
    return out


def _lines(payload: CanvasHeatmap, left: int, top: int, scale: int) -> list[str]:
    """A window's edge (CanvasHeatmap.lines), dashed 6 on 4, from cell centre to centre, and its words."""
    out = []
    for line in payload.lines:
        x0, y0 = left + (line["x0"] + 0.5) * scale, top + (line["y0"] + 0.5) * scale
        x1, y1 = left + (line["x1"] + 0.5) * scale, top + (line["y1"] + 0.5) * scale
        colour = escape(str(line["colour"]), {'"': "&quot;"})
        out.append(f'<line x1="{x0:.2f}" y1="{y0:.2f}" x2="{x1:.2f}" y2="{y1:.2f}" stroke="{colour}" '
                   'stroke-width="2" stroke-dasharray="6 4"/>')
        out.append(_text(x0 + 4, y0 + 10, line["text"], anchor="start", baseline="middle", fill=colour))
    return out


def _line(x0: float, y0: float, x1: float, y1: float, colour: str) -> str:
    return f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y1}" stroke="{colour}" stroke-width="1"/>'


def _text(x: float, y: float, text: str, *, anchor: str, baseline: str, size: int = 12, turn: bool = False,
          fill: str = _INK) -> str:
    """One label, escaped; `turn`: a quarter turn left about its anchor (read bottom to top)."""
    turned = f' transform="rotate(-90 {x:.2f} {y:.2f})"' if turn else ""
    return (f'<text x="{x:.2f}" y="{y:.2f}" text-anchor="{anchor}" dominant-baseline="{baseline}" '
            f'font-size="{size}" fill="{fill}"{turned}>{escape(text)}</text>')

