"""Heatmaps drawn on one canvas from binary arrays: the Model heads page's all-heads grid, zoom and token focus.

A Plotly heatmap costs the browser ~100-140 ms per chart in Streamlit however few its cells (axes, SVG text
measured one by one, the toolbar); the page drew three per sentence, most of the everyday loop
(benchmarks/NOTES.md, "The everyday loop's floor"). Here Python decides every colour and every number: each
cell's colour index (uint8) and its value (float32) travel as raw bytes, with a JSON header of labels,
ticks and the colour table. heatmap.js (beside this file) only copies colours into pixels, writes the
numbers it was given, and says which cell or tile the pointer is on. It does no attention math.

    payload = view_canvas(view)          a MatrixView (attention.models.zoom, token_focus)
    payload = grid_canvas(survey.tiles)  every layer x head, one tile each
    payload.to_bytes()                   what the page's component gets (pages/_canvas.py)
    payload                              in a notebook: drawn by the same heatmap.js (_repr_html_)
    CanvasHeatmap.from_bytes(b)          the payload back, for tests and for anyone reading what was sent

The same views as Plotly figures, for notebooks that want Plotly's toolbar: attention.figures.head_grid,
view_heatmap.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from uuid import uuid4

import numpy as np
from plotly.colors import get_colorscale, sample_colorscale

from attention.figures.base import GRID_SCALE, LOG_FLOOR, WEIGHT_SCALE, WEIGHTS, Colours, layer_names, tiled

NO_COLOUR = 255  # a colour index that draws nothing: gaps between tiles, masked cells (the background shows)
COLOURS = 255  # indices 0..254 are the colour table's steps
MASKED_BACKGROUND = "#d9d9d9"  # as the Plotly heatmaps: masked cells grey
MAGIC = b"AEH1"  # payload format: magic, header length (uint32 LE), header JSON, colour indices, float32 values


@dataclass(frozen=True)
class Tiles:
    """A grid of small matrices (one per layer x head) laid out with a one-cell gap: hover and clicks name
    the tile, counted from 1 as pages say it."""

    rows: int  # cells per tile, down
    cols: int  # cells per tile, across
    row_title: str = "layer"
    col_title: str = "head"
    extra_label: str = ""  # one more number per tile in the hover ("sink mass")
    extra: tuple[int, ...] = ()  # (n_tile_rows * n_tile_cols,) whole percents, row-major
    # (n_tile_rows * n_tile_cols,) each tile's rows' largest value, averaged: the keyboard's tip, moving tile by
    # tile (1.0 = every query puts all its weight on one key). Its largest value said nothing: 1.000 in every
    # tile of a decoder, whose first token sees only itself.
    row_peak: tuple[float, ...] = ()
    block: int = 1  # tokens per cell, each way (a cell is a block's largest weight when > 1)
    tokens: tuple[str, ...] = ()  # with block 1: the token each row (query) and column (key) of a tile stands for


@dataclass(frozen=True)
class CanvasHeatmap:
    """Everything heatmap.js draws: shapes (rows, cols) for `colour` and `values`."""

    colour: np.ndarray  # (rows, cols) uint8: index into `palette`, NO_COLOUR for none
    values: np.ndarray  # (rows, cols) float32: the number hover (and, with show_values, the cell) says
    palette: tuple[str, ...]  # COLOURS "#rrggbb" steps of the colour scale
    x_ticks: tuple[tuple[float, str], ...]  # (cell coordinate of the label's centre, label); thinned to fit
    y_ticks: tuple[tuple[float, str], ...]
    x_names: tuple[str, ...]  # every column's name in the hover (tokens); () with tiles
    y_names: tuple[str, ...]
    colorbar: tuple[tuple[float, str], ...]  # (position 0..1 from the bottom, label)
    title: str = ""
    export_title: str = ""  # what a saved PNG (and a screen reader) calls an untitled chart
    x_title: str = "key"
    y_title: str = "query"
    value_name: str = "weight"
    value_note: str = ""  # after the value in the hover: " (block max)"
    digits: int = 3  # the hover's decimals
    show_values: bool = False  # write each cell's value in it (rounded to cell_digits) where it fits
    cell_digits: int = 2
    tiles: Tiles | None = None
    click: str | None = None  # "tile", "cell" or None: what a click (or Enter) reports
    click_text: str = ""  # a last hover line saying what a click on a cell does
    x_top: bool = False  # column labels above the cells (the grid) rather than below
    height: int = 400  # px
    background: str = "#ffffff"
    lines: tuple[dict, ...] = ()  # {"x0", "y0", "x1", "y1" (cell coordinates), "colour", "text"}: a window edge
    file_name: str = "attention"  # the PNG button's file, without ".png"
    meta: dict = field(default_factory=dict)  # what it shows ({"layer", "head", "token"}), as figures.named

    @property
    def shape(self) -> tuple[int, int]:
        return self.colour.shape

    def header(self) -> dict:
        """The JSON half of the payload (everything but the two arrays)."""
        rows, cols = self.shape
        return {"rows": rows, "cols": cols, "palette": list(self.palette), "x_ticks": [list(t) for t in self.x_ticks],
                "y_ticks": [list(t) for t in self.y_ticks], "x_names": list(self.x_names),
                "y_names": list(self.y_names), "colorbar": [list(t) for t in self.colorbar], "title": self.title,
                "export_title": self.export_title,
                "x_title": self.x_title, "y_title": self.y_title, "value_name": self.value_name,
                "value_note": self.value_note, "digits": self.digits, "show_values": self.show_values,
                "cell_digits": self.cell_digits, "tiles": None if self.tiles is None else {
                    "rows": self.tiles.rows, "cols": self.tiles.cols, "row_title": self.tiles.row_title,
                    "col_title": self.tiles.col_title, "extra_label": self.tiles.extra_label,
                    "extra": list(self.tiles.extra), "row_peak": list(self.tiles.row_peak),
                    "block": self.tiles.block, "tokens": list(self.tiles.tokens)},
                "click": self.click, "click_text": self.click_text, "x_top": self.x_top, "height": self.height,
                "background": self.background,
                "lines": list(self.lines), "file_name": self.file_name, "meta": self.meta}

    def to_bytes(self) -> bytes:
        """MAGIC, the header's length (uint32, little-endian), the header as UTF-8 JSON padded with spaces to a
        multiple of 4, the colour indices (rows*cols uint8, padded to 4), then the values (rows*cols float32
        LE). The browser reads both arrays in place, with no parsing."""
        head = json.dumps(self.header(), ensure_ascii=False).encode()
        head += b" " * (-len(head) % 4)
        colour = np.ascontiguousarray(self.colour, dtype=np.uint8).tobytes()
        colour += b"\0" * (-len(colour) % 4)
        values = np.ascontiguousarray(self.values, dtype="<f4").tobytes()
        return MAGIC + struct.pack("<I", len(head)) + head + colour + values

    @classmethod
    def from_bytes(cls, data: bytes) -> CanvasHeatmap:
        """The payload to_bytes wrote."""
        if data[:4] != MAGIC:
            raise ValueError("not a canvas heatmap payload")
        (n,) = struct.unpack("<I", data[4:8])
        h = json.loads(data[8:8 + n])
        rows, cols = h["rows"], h["cols"]
        start = 8 + n
        colour = np.frombuffer(data, np.uint8, rows * cols, start).reshape(rows, cols)
        start += rows * cols + (-(rows * cols) % 4)
        values = np.frombuffer(data, "<f4", rows * cols, start).reshape(rows, cols)
        tiles = None if h["tiles"] is None else Tiles(**{**h["tiles"], "extra": tuple(h["tiles"]["extra"]),
                                                         "row_peak": tuple(h["tiles"]["row_peak"]),
                                                         "tokens": tuple(h["tiles"]["tokens"])})
        pairs = lambda key: tuple((float(p), str(t)) for p, t in h[key])  # noqa: E731
        return cls(colour=colour, values=values, palette=tuple(h["palette"]), x_ticks=pairs("x_ticks"),
                   y_ticks=pairs("y_ticks"), x_names=tuple(h["x_names"]), y_names=tuple(h["y_names"]),
                   colorbar=pairs("colorbar"), title=h["title"], export_title=h["export_title"],
                   x_title=h["x_title"], y_title=h["y_title"],
                   value_name=h["value_name"], value_note=h["value_note"], digits=h["digits"],
                   show_values=h["show_values"], cell_digits=h["cell_digits"], tiles=tiles, click=h["click"],
                   click_text=h["click_text"],
                   x_top=h["x_top"], height=h["height"], background=h["background"], lines=tuple(h["lines"]),
                   file_name=h["file_name"], meta=h["meta"])

    def _repr_html_(self) -> str:
        """In Jupyter: the same drawing as the page, by the same heatmap.js (no clicks back to Python)."""
        box = f"aeh-{uuid4().hex}"
        payload = base64.b64encode(self.to_bytes()).decode()
        return (f'<div id="{box}" style="width:100%"></div><style>{source("css")}</style>'
                f'<script type="module">\n'
                f'const draw = (() => {{ {source("js").replace("export default", "return")} }})();\n'
                f'const bytes = Uint8Array.from(atob("{payload}"), c => c.charCodeAt(0));\n'
                f'draw({{data: bytes, parentElement: document.getElementById("{box}"), setTriggerValue: () => {{}}}});'
                f'\n</script>')


@cache
def source(kind: str) -> str:
    """heatmap.js or heatmap.css (kind "js" or "css"), shipped beside this module."""
    return resources.files("attention.figures").joinpath(f"heatmap.{kind}").read_text(encoding="utf-8")


@cache
def palette(scale: str | tuple = WEIGHT_SCALE) -> tuple[str, ...]:
    """COLOURS steps of a Plotly colour scale (a name, or ((position, colour), ...)) as "#rrggbb"."""
    stops = get_colorscale(scale) if isinstance(scale, str) else [list(s) for s in scale]
    rgb = sample_colorscale(stops, np.linspace(0, 1, COLOURS).tolist(), colortype="tuple")
    return tuple("#" + "".join(f"{round(c * 255):02x}" for c in step) for step in rgb)


def colour_index(values: np.ndarray, zmin: float, zmax: float, *, log: bool = False,
                 visible: np.ndarray | None = None) -> np.ndarray:
    """Each value's step of the colour table (0..COLOURS-1), NO_COLOUR where it is NaN or not `visible`. With
    `log`, steps follow log10 of the value from LOG_FLOOR (and zmin, zmax are ignored).
    Shapes: values (rows, cols), visible (rows, cols) bool or None -> (rows, cols) uint8."""
    v = np.asarray(values, dtype=np.float64)
    if log:
        v, zmin, zmax = np.log10(np.clip(v, LOG_FLOOR, None)), np.log10(LOG_FLOOR), 0.0
    span = zmax - zmin if zmax > zmin else 1.0
    steps = np.rint(np.clip((v - zmin) / span, 0, 1) * (COLOURS - 1))
    out = np.where(np.isfinite(v), steps, NO_COLOUR).astype(np.uint8)
    if visible is not None:
        out[~np.asarray(visible, bool)] = NO_COLOUR
    return out


def linear_colorbar(zmin: float, zmax: float, count: int = 5) -> tuple[tuple[float, str], ...]:
    """Evenly spaced colour bar labels from zmin to zmax, each with as few digits as tell it from its
    neighbours (0 to 2.996: 0, 0.75, 1.5, 2.25, 3; not 0.749)."""
    values = [zmin + (zmax - zmin) * i / (count - 1) for i in range(count)]
    step = abs(zmax - zmin) / (count - 1) or 1.0
    digits = max(0, 1 - int(np.floor(np.log10(step))))  # two significant digits of the step
    return tuple((i / (count - 1), f"{round(v, digits):g}") for i, v in enumerate(values))


def log_colorbar() -> tuple[tuple[float, str], ...]:
    """A log10 colour bar labelled in the values it stands for: 0.0001, 0.001 ... 1."""
    low = int(np.log10(LOG_FLOOR))
    return tuple(((e - low) / -low, f"{10.0 ** e:g}") for e in range(low, 1))


def grid_canvas(tiles: np.ndarray, *, title: str = "", hover_extra: np.ndarray | None = None,
                hover_label: str = "", layer_kinds: tuple[str, ...] = (), block: int = 1, tokens=(),
                file_name: str = "all-heads", export_title: str = "") -> CanvasHeatmap:
    """Every layer x head as one small tile, a one-cell gap between tiles: attention.figures.head_grid's
    picture. Hover names the tile (from 1) and the cell's weight (the largest of a block of `block` x `block`
    tokens when block > 1; the keyboard's tip, moving tile by tile, the mean of its rows' largest), with `hover_extra`
    (L, H) one more number in whole percents; a click reports the tile. `layer_kinds`
    (ModelAttention.layer_kind per layer) label the layers whose kind differs from the most common one
    ("6 · global"). The hover names the cell's query and key: by `tokens` (the result's) when each cell is one
    token, by their positions' range when it is a block.
    Shapes: tiles (L, H, c, c')."""
    n_layers, n_heads, c, c2 = tiles.shape
    values = tiled(tiles)
    names, common = layer_names(layer_kinds, n_layers)
    extra = () if hover_extra is None else tuple(int(x) for x in np.rint(np.clip(hover_extra, 0, 1) * 100).ravel())
    peaks = np.where(np.isfinite(tiles), tiles, -np.inf).max(axis=3)  # (L, H, c) each row's largest
    peaks = np.where(np.isfinite(peaks), peaks, np.nan).reshape(n_layers * n_heads, c)
    seen = np.isfinite(peaks).any(axis=1)
    row_peak = tuple(float(np.nanmean(p)) if ok else 0.0 for p, ok in zip(peaks, seen, strict=True))
    return CanvasHeatmap(
        colour=colour_index(values, 0.0, 1.0), values=values, palette=palette(tuple(map(tuple, GRID_SCALE))),
        x_ticks=tuple((h * (c2 + 1) + (c2 - 1) / 2, str(h + 1)) for h in range(n_heads)),
        y_ticks=tuple((i * (c + 1) + (c - 1) / 2, names[i]) for i in range(n_layers)),
        x_names=(), y_names=(), colorbar=linear_colorbar(0.0, 1.0), title=title, export_title=export_title,
        x_title="head",
        y_title="layer" + (f" (the others {common})" if common else ""),
        value_note=f" (largest of {block}×{block} tokens)" if block > 1 else "",
        tiles=Tiles(rows=c, cols=c2, extra_label=hover_label if hover_extra is not None else "", extra=extra,
                    row_peak=row_peak, block=block,
                    tokens=tuple(map(str, tokens)) if block == 1 and len(tokens) == max(c, c2) else ()),
        click="tile", x_top=True, height=int(min(2400, 80 + n_layers * 70)), file_name=file_name)


def view_canvas(view, *, x_title: str = "key", y_title: str = "query", height: int | None = None,
                clickable: bool = False, click_text: str = "", row_groups: int | None = None,
                file_name: str = "attention", meta: dict | None = None) -> CanvasHeatmap:
    """A MatrixView (attention.models.recorded.views) as attention.figures.view_heatmap draws it: its labels,
    title and mask (grey), weights from 0 to its zmax, by log10 when the view was read with log colours, its
    window's edge; each cell's value written in it while the matrix is small (at most 16 columns, 400 cells).
    `row_groups`: label every g-th row only, by its label's first word ("L3 H1" -> "L3").
    With `clickable`, a click reports the cell, and `click_text` ends its hover saying what a click does."""
    z = np.asarray(view.matrix, dtype=np.float64)
    n = z.shape[0]
    visible = np.ones(z.shape, bool) if view.mask is None else np.broadcast_to(np.asarray(view.mask, bool), z.shape)
    drawn = matrix_canvas(np.where(visible, z, np.nan), view.col_labels, view.row_labels, title=view.title,
                          x_title=x_title, y_title=y_title, value_name=view.value_name,
                          colours=Colours(0.0, view.zmax, log=view.log), height=height,
                          click_text=click_text if clickable else "", file_name=file_name, meta=meta)
    lines = ()
    window, b = view.window, view.block
    if window is not None and n * b > window:  # as figures.window_edge: slope 1 from the first full window
        def cell(edge: float) -> float:
            return edge / b - 0.5
        y0, y1 = cell(window - 0.5), n - 0.5
        lines = ({"x0": cell(0), "y0": y0, "x1": cell(0) + y1 - y0, "y1": y1, "colour": "#d62728",
                  "text": f"window: {window:,} tokens"},)
    rows = drawn.y_names
    return replace(drawn, lines=lines, value_note=" (block max)" if b > 1 else "", click="cell" if clickable else None,
                   y_ticks=tuple((float(i), rows[i].split(" ")[0]) for i in range(0, n, row_groups)) if row_groups
                   else drawn.y_ticks)


def matrix_canvas(z, x_labels, y_labels, *, title: str = "", x_title: str = "key", y_title: str = "query",
                  value_name: str = "weight", colours: Colours = WEIGHTS, height: int | None = None,
                  show_values: bool | None = None, click_text: str = "", file_name: str = "attention",
                  meta: dict | None = None) -> CanvasHeatmap:
    """Any labelled matrix as attention.figures.heatmap draws it (the same `colours`: a scale, its ends, centred
    on 0 for signed values), on a canvas. NaN cells are left empty (grey). `show_values` writes each cell's
    value in it (default: at most 16 columns and 400 cells). With `click_text` (the hover's last line: what a
    click does) a click or Enter reports the cell.
    Shapes: z (n, m), x_labels m, y_labels n."""
    z = np.asarray(z, dtype=np.float64)
    n, m = z.shape
    finite = z[np.isfinite(z)]
    low = colours.zmin if colours.zmin is not None else (float(finite.min()) if finite.size else 0.0)
    high = colours.zmax if colours.zmax is not None else (float(finite.max()) if finite.size else 1.0)
    if colours.centred:
        high = max(abs(low), abs(high)) or 1.0
        low = -high
    if high <= low:
        high = low + 1.0
    rows, cols = [str(s) for s in y_labels], [str(s) for s in x_labels]
    return CanvasHeatmap(
        colour=colour_index(z, low, high, log=colours.log), values=z.astype(np.float32),
        palette=palette(colours.scale if isinstance(colours.scale, str) else tuple(map(tuple, colours.scale))),
        x_ticks=tuple((float(j), s) for j, s in enumerate(cols)),
        y_ticks=tuple((float(i), s) for i, s in enumerate(rows)),
        x_names=tuple(cols), y_names=tuple(rows),
        colorbar=log_colorbar() if colours.log else linear_colorbar(low, high), title=title, x_title=x_title,
        y_title=y_title, value_name=value_name,
        show_values=(m <= 16 and n * m <= 400) if show_values is None else show_values,
        height=height or (max(260, 80 + 34 * n) if n * m <= 600 else min(900, max(400, 120 + 6 * n))),
        click="cell" if click_text else None, click_text=click_text,
        background=MASKED_BACKGROUND, file_name=file_name, meta=dict(meta or {}))


def layer_head_canvas(values, *, title: str, value_name: str, colours: Colours, show_values: bool = False,
                      height: int | None = None, click_text: str = "", file_name: str = "heads") -> CanvasHeatmap:
    """One number per head, layers down and heads across, labelled from 1, as attention.figures'
    layer_head_heatmap draws it, on a canvas (Head atlas's statistics and roles). A click (with `click_text`)
    reports the cell: row = layer, col = head, from 0.
    Shapes: values (L, H)."""
    values = np.asarray(values, dtype=np.float64)
    n_layers, n_heads = values.shape
    return matrix_canvas(values, [str(h + 1) for h in range(n_heads)], [str(i + 1) for i in range(n_layers)],
                         title=title, x_title="head", y_title="layer", value_name=value_name, colours=colours,
                         show_values=show_values, height=height or min(1000, 140 + 22 * n_layers),
                         click_text=click_text, file_name=file_name)
