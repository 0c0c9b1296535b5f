"""A figure for a paper: whatever a figure builder made, written as SVG, PDF or PNG, offline (issue 72).

    write_figure(figures.head(att, 2, 5), "head.svg")     a Plotly figure: through Kaleido and a local Chromium
    write_figure(figures.matrix_canvas(w), "w.pdf")       a canvas heatmap: our own SVG (attention.figures.svg),
    write_figure(notebook_heatmap(att), "heads.png")      a PDF of it through CairoSVG, a PNG drawn in Python

The format is the file's suffix. A Plotly figure needs the [figures] extra (Kaleido 1.x) and a Chrome or Chromium
on the machine (Debian: `apt install chromium`; Kaleido finds it, fetches nothing); a canvas heatmap's SVG and
PNG need nothing more, its PDF needs CairoSVG (the same extra) and the system's libcairo. What is missing is said
in words, with the command that installs it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from attention.figures.canvas import CanvasHeatmap

FORMATS = ("svg", "pdf", "png")
EXTRA = "pip install 'attention-explorer[figures]' (make install-dev installs it)"


class FigureExportError(RuntimeError):
    """A figure that cannot be written here: the message says what is missing and how to get it."""


def write_figure(figure, path: str | Path, *, scale: float | None = None) -> Path:
    """Write `figure` (a Plotly figure, a CanvasHeatmap, or a NotebookHeatmap) to `path` in the format its suffix
    names (.svg, .pdf, .png); returns the path. `scale`: a Plotly figure's pixel ratio (PNG), or a canvas heatmap's
    px per cell (default: as the PNG draws it)."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"write_figure writes {', '.join('.' + f for f in FORMATS)}, not {path.name!r}")
    payload = getattr(figure, "payload", figure)  # a NotebookHeatmap holds its CanvasHeatmap
    if isinstance(payload, CanvasHeatmap):
        path.write_bytes(_canvas_bytes(payload, fmt, None if scale is None else int(scale)))
        return path
    if hasattr(figure, "to_plotly_json"):
        path.write_bytes(_plotly_bytes(figure, fmt, scale))
        return path
    raise TypeError(f"write_figure writes a Plotly figure or a canvas heatmap (a figure builder's output), not a "
                    f"{type(figure).__name__}")


def _canvas_bytes(payload: CanvasHeatmap, fmt: str, scale: int | None) -> bytes:
    from attention.figures.png import heatmap_png
    from attention.figures.svg import heatmap_svg

    if fmt == "png":
        return heatmap_png(payload, scale=scale)
    svg = heatmap_svg(payload, scale=scale).encode("utf-8")
    if fmt == "svg":
        return svg
    if importlib.util.find_spec("cairosvg") is None:
        raise FigureExportError(f"a canvas heatmap's PDF is made from its SVG by CairoSVG, which is not installed: "
                                f"{EXTRA}. The SVG needs nothing: write it with a .svg name.")
    try:
        import cairosvg
    except OSError as err:  # cairocffi found no libcairo
        raise FigureExportError(f"CairoSVG needs the system's cairo library ({err}): Debian `apt install "
                                "libcairo2`, macOS `brew install cairo`. The SVG needs nothing.") from err
    return cairosvg.svg2pdf(bytestring=svg)


def _plotly_bytes(figure, fmt: str, scale: float | None) -> bytes:
    if importlib.util.find_spec("kaleido") is None:
        raise FigureExportError(f"a Plotly figure is written as {fmt.upper()} by Kaleido, which is not installed: "
                                f"{EXTRA}; it also needs a Chrome or Chromium (Debian: apt install chromium).")
    try:
        return figure.to_image(format=fmt, scale=scale)
    except Exception as err:  # Kaleido's ChromeNotFoundError and the like: say what to do, not where it failed
        if "chrom" in f"{type(err).__name__} {err}".lower():
            raise FigureExportError(f"Kaleido found no Chrome or Chromium to draw the {fmt.upper()} with ({err}). "
                                    "Debian: apt install chromium; or set BROWSER_PATH to one.") from err
        raise
