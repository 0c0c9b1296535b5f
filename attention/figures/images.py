"""Figures of an image model's attention, drawn over the picture the model saw (attention.models.recorded.image_reads
computes every number; these only lay them out). The page "Attention in an image model" and notebooks draw the
same ones, through attention.figures.

    picture(att, values=None, ...)      the image with its patch grid; per-patch values over it; clickable patches
    heads_over_image(att, maps, ...)    every head of a layer at once, one small map over the image each
    norms_chart(att, layer)             every token's hidden-state norm after a layer, high-norm tokens marked

Patches are named "patch (row, col)" from 1, as the tokens are; customdata counts rows and columns from 0.
The image is drawn from a PNG (a small image scaled up pixel by pixel, so an 8 x 8 digit stays sharp), and the
values as a heatmap whose colours run from clear to red, so the picture shows through where a head looks away.

Shapes: rows x cols patches, p pixels a patch side, H heads.
"""

from __future__ import annotations

import base64
import functools
import io

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from attention.figures.base import esc
from attention.models import HIGH_NORM_FACTOR, ImagePatches, ModelAttention, token_norms

OVER_IMAGE = [[0.0, "rgba(255, 235, 59, 0)"], [0.2, "rgba(255, 193, 7, 0.35)"], [0.6, "rgba(244, 81, 30, 0.7)"],
              [1.0, "rgba(183, 28, 28, 0.9)"]]  # clear where a head gives nothing, red where it gives the most
MIN_DRAWN_SIDE = 256  # pixels: a smaller image is scaled up by whole pixels to at least this
SELECTED = "#1565c0"


def image_uri(pixels: np.ndarray, *, min_side: int = MIN_DRAWN_SIDE) -> tuple[str, int]:
    """(a PNG data URI of the pixels, the whole factor they were scaled up by with nearest neighbours), made
    once per image and size (a page draws one image several times). Shapes: pixels (h, w, 3) uint8."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    return _png_uri(pixels.tobytes(), pixels.shape, min_side)


@functools.lru_cache(maxsize=16)
def _png_uri(data: bytes, shape: tuple[int, ...], min_side: int) -> tuple[str, int]:
    from PIL import Image

    scale = max(1, -(-min_side // max(1, min(shape[:2]))))
    image = Image.fromarray(np.frombuffer(data, dtype=np.uint8).reshape(shape))
    if scale > 1:
        image = image.resize((shape[1] * scale, shape[0] * scale), Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)  # fast: the browser gets it once a chart
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii"), scale


def _grid(att: ModelAttention) -> ImagePatches:
    if att.image is None:
        raise ValueError(f"{att.model_name} read a text, not an image")
    return att.image


FADED = 0.4  # under weights, the picture keeps this much of its contrast, on light grey: the colours read as the bar


def _image_trace(grid: ImagePatches, *, min_side: int = MIN_DRAWN_SIDE, faded: bool = False) -> go.Image:
    pixels = grid.pixels
    if faded:  # 0..255 -> 153..255: black is light grey, white stays white
        pixels = np.rint(255 - FADED * (255 - pixels.astype(np.float32))).astype(np.uint8)
    uri, scale = image_uri(pixels, min_side=min_side)
    # pixel j of the original spans [j - 0.5, j + 0.5]: the scaled image's first pixel is centred at -0.5 + 0.5/s
    return go.Image(source=uri, x0=-0.5 + 0.5 / scale, dx=1 / scale, y0=-0.5 + 0.5 / scale, dy=1 / scale,
                    hoverinfo="skip", name="image")


def _centres(grid: ImagePatches) -> tuple[np.ndarray, np.ndarray]:
    """The x (columns) and y (rows) of each patch's centre, in pixels."""
    p = grid.patch
    return np.arange(grid.cols) * p + (p - 1) / 2, np.arange(grid.rows) * p + (p - 1) / 2


def _overlay(grid: ImagePatches, values: np.ndarray, *, zmax: float | None, value_name: str, show_scale: bool = True,
             hover: bool = True) -> go.Heatmap:
    xs, ys = _centres(grid)
    top = float(np.nanmax(values)) if zmax is None else zmax
    names = np.array([[f"patch ({r + 1}, {c + 1})" for c in range(grid.cols)] for r in range(grid.rows)])
    return go.Heatmap(z=values, x=xs, y=ys, zmin=0.0, zmax=max(top, 1e-12), colorscale=OVER_IMAGE,
                      showscale=show_scale, text=names, name=value_name,
                      hovertemplate=f"%{{text}}<br>{esc(value_name)}: %{{z:.1%}}<extra></extra>" if hover else None,
                      hoverinfo=None if hover else "skip",
                      colorbar=dict(title=dict(text=esc(value_name), side="right"), thickness=12, tickformat=".0%",
                                    len=0.8))


def _grid_lines(fig: go.Figure, grid: ImagePatches) -> None:
    """The patches' edges as one trace of line segments (a shape each is slow to build for a 37 x 37 grid)."""
    p, h, w = grid.patch, grid.rows * grid.patch, grid.cols * grid.patch
    xs, ys = [], []
    for c in range(grid.cols + 1):
        xs += [c * p - 0.5, c * p - 0.5, None]
        ys += [-0.5, h - 0.5, None]
    for r in range(grid.rows + 1):
        xs += [-0.5, w - 0.5, None]
        ys += [r * p - 0.5, r * p - 0.5, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="rgba(255, 255, 255, 0.55)", width=1),
                             hoverinfo="skip", showlegend=False, name="patch grid"))


def picture(att: ModelAttention, values: np.ndarray | None = None, *, title: str = "", value_name: str = "weight",
            selected: tuple[int, int] | None = None, clickable: bool = False, zmax: float | None = None,
            height: int = 460) -> go.Figure:
    """The image the model read with its patch grid; `values` (rows, cols) drawn over it (clear at 0, red at
    `zmax`, default their largest; the picture faded under them); `title` escaped, a new line at each "\n";
    `selected` (row, col, from 0) outlined; `clickable` lays a point on every
    patch (customdata: row, col from 0), so a Streamlit selection names the patch clicked."""
    grid = _grid(att)
    fig = go.Figure(_image_trace(grid, faded=values is not None))
    if values is not None:
        fig.add_trace(_overlay(grid, np.asarray(values, dtype=float), zmax=zmax, value_name=value_name))
    _grid_lines(fig, grid)
    p = grid.patch
    if clickable:
        xs, ys = _centres(grid)
        cols, rows = np.meshgrid(np.arange(grid.cols), np.arange(grid.rows))
        said = "" if values is None else f"<br>{esc(value_name)}: %{{customdata[2]:.1%}}"
        data = np.column_stack([rows.ravel(), cols.ravel(),
                                np.zeros(rows.size) if values is None else np.asarray(values, float).ravel()])
        size = max(6, min(60, (height - 80) // max(grid.rows, grid.cols)))
        names = [f"patch ({r + 1}, {c + 1})" for r in range(grid.rows) for c in range(grid.cols)]
        fig.add_trace(go.Scatter(x=np.tile(xs, grid.rows), y=np.repeat(ys, grid.cols), mode="markers",
                                 customdata=data, text=names, showlegend=False, name="patches",
                                 marker=dict(size=size, opacity=0, symbol="square"),
                                 hovertemplate=_patch_hover(said)))
    if selected is not None:
        r, c = selected
        fig.add_shape(type="rect", x0=c * p - 0.5, x1=(c + 1) * p - 0.5, y0=r * p - 0.5, y1=(r + 1) * p - 0.5,
                      line=dict(color=SELECTED, width=3))
    h, w = grid.rows * p, grid.cols * p
    fig.update_xaxes(range=[-0.5, w - 0.5], showticklabels=False, ticks="", showgrid=False, zeroline=False,
                     constrain="domain")
    fig.update_yaxes(range=[h - 0.5, -0.5], showticklabels=False, ticks="", showgrid=False, zeroline=False,
                     scaleanchor="x", constrain="domain")
    fig.update_layout(title=dict(text="<br>".join(esc(line) for line in title.split("\n"))), height=height,
                      margin=dict(l=10, r=10, t=(40 + 20 * title.count("\n")) if title else 10, b=10),
                      plot_bgcolor="white", dragmode=False)
    return fig


def _patch_hover(extra: str) -> str:
    """Hover text of a clickable patch: customdata holds its row and column from 0; the label counts from 1."""
    return "%{text}" + extra + "<br>click to see where it looks<extra></extra>"


def heads_over_image(att: ModelAttention, maps: np.ndarray, *, title: str = "", columns: int = 4,
                     value_name: str = "weight", shared_scale: bool = False,
                     selected: tuple[int, int] | None = None) -> go.Figure:
    """Every head's map (H, rows, cols) over the image, one small panel each ("head 3"), each on its own
    colour scale (a faint head stays visible) unless `shared_scale`; `selected` (row, col from 0), the query
    patch, outlined in each."""
    grid = _grid(att)
    maps = np.asarray(maps, dtype=float)
    n = maps.shape[0]
    columns = max(1, min(columns, n))
    rows = -(-n // columns)
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=[f"head {h + 1}" for h in range(n)],
                        horizontal_spacing=0.02, vertical_spacing=0.06)
    image = _image_trace(grid, min_side=96, faded=True)
    top = float(maps.max()) if shared_scale else None
    for h in range(n):
        r, c = divmod(h, columns)
        fig.add_trace(image, row=r + 1, col=c + 1)
        heat = _overlay(grid, maps[h], zmax=top, value_name=value_name, show_scale=False)
        fig.add_trace(heat.update(hovertemplate=f"head {h + 1} · %{{text}}<br>{esc(value_name)}: %{{z:.1%}}"
                                                "<extra></extra>"), row=r + 1, col=c + 1)
    p = grid.patch
    if selected is not None:
        sr, sc = selected
        for h in range(n):
            fig.add_shape(type="rect", x0=sc * p - 0.5, x1=(sc + 1) * p - 0.5, y0=sr * p - 0.5, y1=(sr + 1) * p - 0.5,
                          line=dict(color=SELECTED, width=2), row=h // columns + 1, col=h % columns + 1)
    fig.update_xaxes(range=[-0.5, grid.cols * p - 0.5], showticklabels=False, ticks="", showgrid=False, zeroline=False,
                     constrain="domain")
    fig.update_yaxes(range=[grid.rows * p - 0.5, -0.5], showticklabels=False, ticks="", showgrid=False, zeroline=False,
                     constrain="domain")
    for i in range(1, n + 1):  # every panel square, whatever the figure's width
        fig.update_yaxes(scaleanchor=f"x{'' if i == 1 else i}", row=(i - 1) // columns + 1, col=(i - 1) % columns + 1)
    fig.update_layout(title=dict(text=esc(title)), height=60 + 190 * rows, margin=dict(l=10, r=10, t=70, b=10),
                      plot_bgcolor="white", dragmode=False, showlegend=False)
    return fig


def norms_chart(att: ModelAttention, layer: int = -1, *, factor: float = HIGH_NORM_FACTOR) -> go.Figure:
    """Every token's hidden-state norm after `layer` (0-based; -1 the last), prefix tokens ([CLS], registers)
    in blue, high-norm tokens in red, patches in grey, and the line above which a token counts as high-norm
    (`factor` x the median patch)."""
    grid = _grid(att)
    norms = token_norms(att)[layer + 1 if layer >= 0 else layer]
    median = float(np.median(norms[grid.first_patch:]))
    kinds = np.where(np.arange(len(norms)) < grid.first_patch, "not a patch", "patch")
    colours = np.where(norms > factor * median, "#c62828", np.where(kinds == "patch", "#90a4ae", "#1565c0"))
    names = [esc(t) for t in att.tokens]
    fig = go.Figure(go.Bar(x=np.arange(len(norms)) + 1, y=norms, marker_color=colours, text=names,
                           textposition="none", hovertemplate="%{text}<br>norm: %{y:.3g}<extra></extra>", name="norm"))
    fig.add_hline(y=factor * median, line=dict(color="#c62828", dash="dash", width=1),
                  annotation_text=f"{factor:g} x the median patch", annotation_position="top left")
    shown = "the last layer" if layer in (-1, att.n_layers - 1) else f"layer {layer + 1}"
    fig.update_layout(title=dict(text=f"Each token's norm after {shown}"),
                      height=320, margin=dict(l=10, r=10, t=50, b=10), plot_bgcolor="white", showlegend=False,
                      bargap=0.1)
    fig.update_xaxes(title_text="token (1 = the first; patches row by row)", dtick=1 if len(norms) <= 40 else None)
    fig.update_yaxes(title_text="L2 norm of the hidden state", rangemode="tozero")
    return fig
