"""Notebook charts (attention.figures.notebook): one output that a notebook, an exported page and a code host
each read their own way, small, its PNG decoded here by hand, its page drawn offline by a real browser, and
user text kept as text."""

from __future__ import annotations

import base64
import re
import struct
import zlib

import numpy as np
import pytest

from attention.figures import GRID_SCALE, NotebookHeatmap, grid_canvas, matrix_canvas
from attention.figures.png import frame

HOSTILE = "<img src=x onerror=window.__x=1>"
TOKENS = ["[CLS]", "the", HOSTILE, "cat", "sat", "on", "the", "river", "bank", ".", "日本", "[SEP]"]
# A 12-token grid of MiniLM's shape (6 layers x 12 heads) as text/html: heatmap.js and .css (21 kB), the arrays
# (77 x 155 cells, 1 colour byte + 4 value bytes each: 60 kB, 80 kB as base64, with a 3 kB header) and the
# fallback PNG (random weights as here compress worst: 17 kB, 23 kB as base64) come to 132 kB; 150 kB leaves 15 %
# for a longer title or header. MiniLM's own 11-token grid is 118 kB; BertViz's head_view for it is 5.0 MB.
GRID_HTML_BUDGET = 150_000


def attention_tiles(seed: int = 0, layers: int = 6, heads: int = 12, n: int = 12) -> np.ndarray:
    """Rows that sum to 1, some peaked on the first token as real heads' are. Shapes: -> (L, H, n, n)."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(n, 0.3), size=(layers, heads, n))
    w[::2, :, :, 0] += 2.0  # every other layer: a sink on the first token
    return (w / w.sum(axis=-1, keepdims=True)).astype(np.float32)


def read_png(data: bytes) -> np.ndarray:
    """A PNG's pixels as (height, width, 3) uint8, by the PNG specification alone: 8-bit RGB, RGBA or palette,
    not interlaced, the five row filters."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        chunks[kind] = chunks.get(kind, b"") + body  # IDAT chunks join
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and interlace == 0 and colour in (2, 3, 6)
    channels = {2: 3, 3: 1, 6: 4}[colour]
    raw, stride = zlib.decompress(chunks[b"IDAT"]), width * channels
    rows, prior = [], [0] * stride
    for y in range(height):
        kind, line = raw[y * (stride + 1)], raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        row = [0] * stride
        for i in range(stride):  # the byte = the filtered byte + a predictor from left a, up b, up-left c
            a, b = row[i - channels] if i >= channels else 0, prior[i]
            c = prior[i - channels] if i >= channels else 0
            if kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                guess = a if pa <= pb and pa <= pc else b if pb <= pc else c
            else:
                guess = (0, a, b, (a + b) // 2)[kind]
            row[i] = (line[i] + guess) & 0xFF
        rows.append(row)
        prior = row
    out = np.array(rows, np.uint8)
    pixels = out.reshape(height, width, channels)
    if colour == 3:
        return np.frombuffer(chunks[b"PLTE"], np.uint8).reshape(-1, 3)[pixels[..., 0]]
    return pixels[..., :3]


def expected_colour(weight: float) -> np.ndarray:
    """A weight's colour from the grid's colour scale itself: 255 steps from 0 to 1 (step = round(254 w)), each
    step's colour interpolated in RGB between the scale's two stops around it."""
    t = np.rint(np.clip(weight, 0, 1) * 254) / 254
    stops = [(p, np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)], float)) for p, c in GRID_SCALE]
    for (p0, c0), (p1, c1) in zip(stops, stops[1:], strict=False):
        if t <= p1:
            return np.rint(c0 + (c1 - c0) * (t - p0) / (p1 - p0))
    return stops[-1][1]


@pytest.fixture(scope="module")
def grid():
    tiles = attention_tiles()
    return tiles, NotebookHeatmap(grid_canvas(tiles, title="Every head", tokens=TOKENS))


def test_one_output_carries_html_for_notebooks_and_a_png_for_code_hosts_small_and_without_plotly(grid):
    _, view = grid
    bundle = view._repr_mimebundle_()
    assert {"text/html", "image/png", "text/plain"} <= set(bundle)
    page = bundle["text/html"]
    assert len(page.encode()) < GRID_HTML_BUDGET
    assert "Plotly.newPlot" not in page and "plotly.js" not in page.lower()  # no plotly.js, inline or linked
    assert not re.search(r"<script[^>]*\bsrc=", page) and "://" not in page  # nothing fetched (base64 has no ":")
    assert HOSTILE not in page and "onerror" not in page  # the tokens travel as base64 data, never as markup
    assert base64.b64decode(bundle["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "77 x 155 cells" in bundle["text/plain"]
    assert set(view._repr_mimebundle_(include={"image/png"})) == {"text/plain", "image/png"}
    one_head = NotebookHeatmap(matrix_canvas(grid[0][0, 0], TOKENS, TOKENS))._repr_mimebundle_()["text/html"]
    assert len(one_head.encode()) < 60_000  # heatmap.js 21 kB, 144 cells, a 12 x 12 PNG


def test_a_plain_array_is_drawn_and_a_wrong_payload_is_told_what_to_call():
    from attention.figures import notebook_heatmap

    z = np.arange(12, dtype=float).reshape(3, 4) - 5  # a signed table, as a cache's slice or a grid of effects
    shown = notebook_heatmap(z)
    assert shown.payload.values.shape == (3, 4) and np.array_equal(shown.payload.values, z.astype(np.float32))
    assert shown.png().startswith(b"\x89PNG") and "<script" in shown.html()
    with pytest.raises(TypeError, match=r"notebook_heatmap\(array\)"):
        NotebookHeatmap(z)


def test_the_png_decodes_and_each_cell_has_its_weights_colour(grid):
    tiles, view = grid
    L, H, n, _ = tiles.shape
    scale = 2
    cells = read_png(NotebookHeatmap(view.payload, scale).png(labels=False))
    assert cells.shape == ((L * (n + 1) - 1) * scale, (H * (n + 1) - 1) * scale, 3)  # IHDR: cells x scale
    labelled = read_png(NotebookHeatmap(view.payload, scale).png())
    f = frame(view.payload, scale)
    assert labelled.shape == (f.height, f.width, 3)
    for layer in range(L):
        for head in range(H):
            for q in range(n):
                for k in range(n):
                    y, x = (layer * (n + 1) + q) * scale + scale // 2, (head * (n + 1) + k) * scale + scale // 2
                    want = expected_colour(tiles[layer, head, q, k])
                    assert np.abs(cells[y, x] - want).max() <= 1, (layer, head, q, k)
                    assert np.abs(labelled[f.top + y, f.left + x] - want).max() <= 1, (layer, head, q, k)
    gap = (n * scale + scale // 2, n * scale + scale // 2)  # between tiles: the background
    assert tuple(cells[gap]) == (255, 255, 255)


@pytest.mark.browser
def test_a_saved_page_draws_offline_and_a_hostile_token_stays_text(tmp_path, browser):
    tiles = attention_tiles(1)
    view = NotebookHeatmap(matrix_canvas(tiles[0, 0], TOKENS, TOKENS, title=f"Layer 1 {HOSTILE}"))
    path = view.to_html(tmp_path / "head.html")
    page = browser.new_page(viewport={"width": 900, "height": 800})
    asked = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(path.as_uri())
    canvas = page.locator("canvas.aeh-canvas[data-plot]")
    canvas.wait_for()
    x, y, w, h = (float(v) for v in canvas.get_attribute("data-plot").split(","))
    inked = page.evaluate(f"""() => {{
        const c = document.querySelector('canvas.aeh-canvas'), r = window.devicePixelRatio || 1;
        const d = c.getContext('2d').getImageData({x} * r, {y} * r, {w} * r, {h} * r).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250) n++;
        return n; }}""")
    assert inked > w * h * 0.5  # the cells are drawn (a 12 x 12 matrix fills its plot)
    box = canvas.bounding_box()  # data-plot is within the canvas; the mouse moves in the page
    page.mouse.move(box["x"] + x + w * 2.5 / 12, box["y"] + y + h * 2.5 / 12)  # query 2 -> key 2: the hostile token
    tip = page.locator(".aeh-tip")
    tip.wait_for(state="visible")
    assert tip.inner_text().count(HOSTILE) == 2
    assert page.locator(".aeh-title").inner_text() == f"Layer 1 {HOSTILE}" and page.title() == f"Layer 1 {HOSTILE}"
    assert page.evaluate("() => window.__x") is None and page.locator("img").count() == 0
    assert all(url.startswith(("file:", "data:", "blob:")) for url in asked), asked  # no server, no network
    # The notebook's fragment: its fallback picture gives way to the live chart where scripts run...
    page.set_content(f"<html><body>{view.html()}</body></html>")
    page.locator("canvas.aeh-canvas[data-plot]").wait_for()
    assert page.locator("img").count() == 0 and page.evaluate("() => window.__x") is None
    page.close()
    # ...and stays where they do not (an untrusted notebook, a sanitising viewer)
    still = browser.new_context(java_script_enabled=False).new_page()
    still.set_content(f"<html><body>{view.html()}</body></html>")
    assert still.evaluate("() => document.querySelector('img').naturalWidth") == frame(view.payload).width
    still.context.close()


@pytest.mark.slow
def test_a_real_models_charts_are_kilobytes_where_bertviz_head_view_is_megabytes(minilm):
    import torch

    from attention.figures import head_view, notebook_heatmap
    from attention.models import attend, shown_tokens

    text = "I sat on the bank of the river"  # 8 words, 10 tokens with [CLS] and [SEP]
    enc = minilm.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        attention = minilm.network(**enc, output_attentions=True).attentions
    tokens = minilm.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    bertviz = len(head_view(attention, tokens, html_action="return").data.encode())
    att = attend(minilm, text)
    grid, one, focus = notebook_heatmap(att), notebook_heatmap(att, 2, 5), notebook_heatmap(att, token=6)
    sizes = {name: len(chart._repr_mimebundle_()["text/html"].encode())
             for name, chart in (("grid", grid), ("one head", one), ("token", focus))}
    assert bertviz > 4_000_000 and sizes["grid"] < 150_000 and sizes["one head"] < 60_000, (bertviz, sizes)
    assert grid.payload.tiles.tokens == shown_tokens(att) and "6 layers × 12 heads" in grid.name
    assert one.payload.meta == {"layer": 2, "head": 5, "token": None} and one.payload.shape == (10, 10)
    assert focus.payload.meta["token"] == shown_tokens(att)[6] and focus.payload.shape == (72, 10)
    assert notebook_heatmap(grid.payload).payload is grid.payload
    with pytest.raises(TypeError, match="a CanvasHeatmap, a 2-D array or a result"):  # weights are 4-D: not one matrix
        notebook_heatmap(att.weights)
    with pytest.raises(ValueError, match="of which layer"):
        notebook_heatmap(att, head=3)
