"""Figures for a paper (issue 72): a canvas heatmap as our own SVG and as a PDF of it, a Plotly figure through
Kaleido, each file opened by something that is not this package (Chromium draws the SVG; the PDF's own header)."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from attention import figures
from attention.figures.svg import MAX_VECTOR_CELLS

SVG = "{http://www.w3.org/2000/svg}"
TOKENS = ["[CLS]", "<b>bank</b>", "&river", "[SEP]"]  # markup in a token: text, never markup


def weights() -> np.ndarray:
    w = np.random.default_rng(0).random((4, 4))
    return w / w.sum(1, keepdims=True)


def test_the_svg_has_a_rectangle_per_run_of_cells_in_the_palette_and_escaped_labels(tmp_path):
    payload = figures.matrix_canvas(weights(), TOKENS, TOKENS, title="L1H2 · “bank” & co")
    path = figures.write_figure(payload, tmp_path / "head.svg")
    root = ET.parse(path).getroot()  # well-formed XML: every token escaped
    texts = [t.text for t in root.iter(SVG + "text")]
    assert "<b>bank</b>" in texts and "&river" in texts and "L1H2 · “bank” & co" in texts
    fills = [r.get("fill") for r in root.iter(SVG + "rect")]
    cells = {payload.palette[int(i)] for i in np.asarray(payload.colour).ravel()}
    assert cells <= set(fills)


@pytest.mark.browser
def test_chromium_draws_the_svgs_cells_in_the_colours_heatmap_js_gives_them(tmp_path, browser):
    """Each cell's centre, as Chromium paints the file, has the palette colour the payload gives that cell."""
    from attention.figures.png import frame

    payload = figures.matrix_canvas(weights(), TOKENS, TOKENS)
    path = figures.write_figure(payload, tmp_path / "head.svg")
    f = frame(payload)
    page = browser.new_page(viewport={"width": f.width, "height": f.height})
    page.goto(path.as_uri())
    shot = page.screenshot(type="png")
    page.close()
    from io import BytesIO

    from PIL import Image

    picture = np.asarray(Image.open(BytesIO(shot)).convert("RGB"))
    colour = np.asarray(payload.colour)
    for r in range(4):
        for c in range(4):
            y, x = int(f.top + (r + 0.5) * f.scale), int(f.left + (c + 0.5) * f.scale)
            want = tuple(int(payload.palette[colour[r, c]][i:i + 2], 16) for i in (1, 3, 5))
            assert tuple(picture[y, x]) == want, (r, c)


def test_a_big_matrix_keeps_vector_labels_around_one_embedded_picture(tmp_path):
    n = int(MAX_VECTOR_CELLS ** 0.5) + 1
    payload = figures.matrix_canvas(np.eye(n), [str(i) for i in range(n)], [str(i) for i in range(n)])
    root = ET.fromstring(figures.heatmap_svg(payload))
    (image,) = list(root.iter(SVG + "image"))
    assert base64.b64decode(image.get("href").split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list(root.iter(SVG + "rect"))) < 1000  # the background and the colour bar, not n * n cells


def test_a_canvas_heatmap_as_pdf_and_a_notebook_heatmap_as_every_format(tmp_path):
    view = figures.NotebookHeatmap(figures.matrix_canvas(weights(), TOKENS, TOKENS))
    pdf = view.to_pdf(tmp_path / "head.pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert ET.parse(view.to_svg(tmp_path / "head.svg")).getroot().tag == SVG + "svg"
    assert figures.write_figure(view, tmp_path / "head.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.browser
def test_a_plotly_figure_builder_writes_svg_and_pdf_through_kaleido_offline(tmp_path, browser):
    fig = figures.weights_bar(TOKENS, weights()[0], title="weights of “bank”")
    svg = figures.write_figure(fig, tmp_path / "bar.svg")
    root = ET.parse(svg).getroot()
    assert root.tag == SVG + "svg" and any("bank" in (t.text or "") for t in root.iter(SVG + "text"))
    assert figures.write_figure(fig, tmp_path / "bar.pdf").read_bytes()[:5] == b"%PDF-"
    page = browser.new_page()
    page.goto(svg.as_uri())
    assert page.locator("svg text").count() > 5  # Chromium opens it: the bars' labels are there
    page.close()


def test_what_cannot_be_written_says_why(tmp_path):
    with pytest.raises(ValueError, match=r"\.svg, \.pdf, \.png"):
        figures.write_figure(figures.matrix_canvas(weights(), TOKENS, TOKENS), tmp_path / "head.jpg")
    with pytest.raises(TypeError, match="Plotly figure or a canvas heatmap"):
        figures.write_figure(weights(), tmp_path / "head.svg")
