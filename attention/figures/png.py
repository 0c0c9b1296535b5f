"""A canvas heatmap (attention.figures.canvas.CanvasHeatmap) as a PNG, drawn in Python: for what shows pictures
but runs no script (a code host's notebook preview, a README, a paper's draft) and for a notebook's fallback.

The cells are the payload's own colour indices looked up in its palette, one `scale` x `scale` block of pixels
per cell (nearest neighbour, no smoothing: a cell's every pixel is the colour heatmap.js gives it). Around them,
with `labels`, what heatmap.js writes: the title, the axis labels (thinned so none overlaps the last), the axes'
titles and the colour bar. Not drawn: the numbers inside cells and the hover (the HTML has them). Labels are
laid on in INK_LEVELS shades, so a picture of at most 256 colours (most: a 12-token grid of 6 x 12 heads is) is
saved with a palette, every pixel exact, at about half the bytes of RGB. Text uses DejaVu Sans where the machine
has it (Arial, else Pillow's own font, which lacks "×"); glyphs the font lacks (CJK) show as boxes here and only
here: the HTML draws them with the browser's fonts.

    heatmap_png(payload)               labelled PNG bytes
    heatmap_png(payload, labels=False) the cells alone: (rows * scale) x (cols * scale) pixels
    frame(payload)                     where the cells sit in the labelled picture
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from attention.figures.canvas import NO_COLOUR, CanvasHeatmap

PNG_SIDE = 640  # px: the automatic scale fits the cells in this width (and 1.5 times it in height)
MAX_SCALE = 40  # px per cell at most (a 3 x 3 matrix stays a readable size, not a poster)
TEXT = (49, 51, 63)  # #31333f, heatmap.js's label colour
BAR = 12  # px: the colour bar's width
GAP = 6  # px between the cells and a label


@dataclass(frozen=True)
class Frame:
    """The labelled picture's geometry: the cells' top-left corner, a cell's side and the whole size, in px."""

    left: int
    top: int
    scale: int
    width: int
    height: int


FONTS = ("DejaVuSans.ttf", "Arial.ttf", "arial.ttf")  # the first found (Linux, macOS, Windows), else Pillow's own
INK_LEVELS = 4  # text's antialiasing, in this many steps: few colours, so most pictures fit a 256-colour PNG


@cache
def _font(size: int = 12):
    for name in FONTS:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)  # Pillow's bundled font: Latin only (no "×")


def _text_size(text: str, size: int = 12) -> tuple[int, int]:
    box = _font(size).getbbox(text)
    return box[2] - box[0], box[3] - box[1]


def _cut(label: str, most: int) -> str:
    return label if len(label) <= most else label[:most - 1] + "…"  # as heatmap.js's cut


def auto_scale(payload: CanvasHeatmap) -> int:
    """Pixels per cell: as many as fit PNG_SIDE across and 1.5 PNG_SIDE down, at least 1, at most MAX_SCALE."""
    rows, cols = payload.shape
    return int(max(1, min(MAX_SCALE, PNG_SIDE // cols, int(1.5 * PNG_SIDE) // rows)))


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def cells_image(payload: CanvasHeatmap, scale: int) -> Image.Image:
    """The cells alone, `scale` px each, NO_COLOUR cells in the payload's background colour.
    Shapes: payload.colour (rows, cols) -> an RGB image (rows * scale) x (cols * scale)."""
    rows, cols = payload.shape
    table = np.zeros((256, 3), np.uint8)
    table[:len(payload.palette)] = [_rgb(c) for c in payload.palette]
    table[NO_COLOUR] = _rgb(payload.background)
    rgb = table[np.asarray(payload.colour, np.uint8)]  # (rows, cols, 3)
    big = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)  # (rows * scale, cols * scale, 3)
    return Image.fromarray(np.ascontiguousarray(big), "RGB")


def _x_labels(payload: CanvasHeatmap, scale: int) -> tuple[list[tuple[float, str]], bool]:
    """The column labels kept (no two closer than they need) and whether they stand upright."""
    labels = [(pos, _cut(text, 18)) for pos, text in payload.x_ticks]
    widest = max((_text_size(t)[0] for _, t in labels), default=0)
    spacing = scale * payload.shape[1] / max(1, len(labels))
    upright = not payload.x_top and widest + 8 > spacing
    room = 13 if upright else widest + 8
    kept, last = [], -np.inf
    for pos, text in labels:
        if (pos + 0.5) * scale - last >= room:
            kept.append((pos, text))
            last = (pos + 0.5) * scale
    return kept, upright


def _y_labels(payload: CanvasHeatmap, scale: int) -> list[tuple[float, str]]:
    kept, last = [], -np.inf
    for pos, text in payload.y_ticks:
        if (pos + 0.5) * scale - last >= 14:
            kept.append((pos, _cut(text, 24)))
            last = (pos + 0.5) * scale
    return kept


def frame(payload: CanvasHeatmap, scale: int | None = None) -> Frame:
    """Where the cells go in the labelled picture, and its size: margins for the title, labels and colour bar."""
    scale = scale or auto_scale(payload)
    rows, cols = payload.shape
    xs, upright = _x_labels(payload, scale)
    x_room = max((_text_size(t)[0] for _, t in xs), default=0) + GAP if upright else 16
    left = 24 + max((_text_size(t)[0] for _, t in _y_labels(payload, scale)), default=0) + GAP
    heading = 26 if payload.title or payload.export_title else 4
    top = heading + (x_room + 18 if payload.x_top else 4)
    bottom = 8 if payload.x_top else x_room + 22
    bar_labels = max((_text_size(t)[0] for _, t in payload.colorbar), default=0)
    right = 14 + BAR + 6 + max(bar_labels, min(90, _text_size(payload.value_name)[0] - 20)) + 8
    return Frame(left, top, scale, left + cols * scale + right, top + max(rows * scale, 60) + bottom)


def _upright(ink: Image.Image, text: str, x: float, y: float, *, anchor_top: bool) -> None:
    """Text turned a quarter left (read bottom to top) onto the ink layer, centred on x, its end at y (anchor_top:
    its start)."""
    w, h = _text_size(text)
    label = Image.new("L", (w + 4, h + 6), 0)
    ImageDraw.Draw(label).text((2, 1), text, font=_font(), fill=255)
    turned = label.rotate(90, expand=True)
    top = int(y) if anchor_top else int(y - turned.height)
    ink.paste(255, (int(x - turned.width / 2), top), turned)


def _colour_bar(img: Image.Image, write: ImageDraw.ImageDraw, payload: CanvasHeatmap, f: Frame) -> None:
    """The palette's steps bottom to top, labelled where Python said, the value's name below (as heatmap.js)."""
    draw = ImageDraw.Draw(img)
    bx, by = f.left + payload.shape[1] * f.scale + 14, f.top
    bh = max(40, min(payload.shape[0] * f.scale, 320))
    steps = [_rgb(c) for c in payload.palette]
    for i in range(bh):  # bottom to top: the palette's first step at the bottom
        draw.line([(bx, by + bh - 1 - i), (bx + BAR - 1, by + bh - 1 - i)], fill=steps[i * len(steps) // bh])
    for pos, label in payload.colorbar:
        write.text((bx + BAR + 4, by + bh - pos * bh), label, font=_font(), fill=255, anchor="lm")
    write.text((bx - 2, by + bh + 17), payload.value_name, font=_font(), fill=255, anchor="lm")


def _lines(img: Image.Image, payload: CanvasHeatmap, f: Frame) -> None:
    """A window's edge (CanvasHeatmap.lines), dashed 6 on 4 as heatmap.js draws it, from cell centre to centre."""
    draw = ImageDraw.Draw(img)
    for line in payload.lines:
        x0, y0, x1, y1 = (f.left + (line["x0"] + 0.5) * f.scale, f.top + (line["y0"] + 0.5) * f.scale,
                          f.left + (line["x1"] + 0.5) * f.scale, f.top + (line["y1"] + 0.5) * f.scale)
        length = max(1.0, float(np.hypot(x1 - x0, y1 - y0)))
        for a in np.arange(0, length, 10.0):
            b = min(a + 6, length)
            draw.line([(x0 + (x1 - x0) * a / length, y0 + (y1 - y0) * a / length),
                       (x0 + (x1 - x0) * b / length, y0 + (y1 - y0) * b / length)], fill=line["colour"], width=2)
        draw.text((x0 + 4, y0 + 10), line["text"], font=_font(), fill=line["colour"], anchor="lm")


def _labelled(payload: CanvasHeatmap, scale: int) -> Image.Image:
    """Cells, borders, window lines and colour bar on the picture; every label on an ink layer that is laid on
    in TEXT colour at the end, its antialiasing in INK_LEVELS steps."""
    f = frame(payload, scale)
    rows, cols = payload.shape
    img = Image.new("RGB", (f.width, f.height), "#ffffff")
    img.paste(cells_image(payload, scale), (f.left, f.top))
    draw = ImageDraw.Draw(img)
    if payload.tiles is None and scale >= 12:  # thin white borders between cells, as heatmap.js draws them
        for c in range(1, cols):
            draw.line([(f.left + c * scale, f.top), (f.left + c * scale, f.top + rows * scale - 1)], fill="#ffffff")
        for r in range(1, rows):
            draw.line([(f.left, f.top + r * scale), (f.left + cols * scale - 1, f.top + r * scale)], fill="#ffffff")
    ink = Image.new("L", img.size, 0)
    write = ImageDraw.Draw(ink)
    if heading := payload.title or payload.export_title:
        write.text((8, 13), _cut(heading, 120), font=_font(15), fill=255, anchor="lm")
    for pos, text in _y_labels(payload, scale):
        write.text((f.left - GAP, f.top + (pos + 0.5) * scale), text, font=_font(), fill=255, anchor="rm")
    xs, upright = _x_labels(payload, scale)
    below = f.top + rows * scale + GAP
    for pos, text in xs:
        x = f.left + (pos + 0.5) * scale
        if payload.x_top:
            write.text((x, f.top - GAP), text, font=_font(), fill=255, anchor="mb")
        elif upright:
            _upright(ink, text, x, below, anchor_top=True)
        else:
            write.text((x, below), text, font=_font(), fill=255, anchor="mt")
    centre = f.left + cols * scale / 2
    write.text((centre, f.top - 34 if payload.x_top else f.height - 4), payload.x_title, font=_font(), fill=255,
               anchor="mt" if payload.x_top else "mb")
    if payload.y_title:
        _upright(ink, _cut(payload.y_title, 60), 10, f.top + rows * scale / 2 + _text_size(payload.y_title)[0] / 2,
                 anchor_top=False)
    _colour_bar(img, write, payload, f)
    step = 255 / (INK_LEVELS - 1)
    img.paste(TEXT, mask=ink.point(lambda v: round(round(v / step) * step)))
    _lines(img, payload, f)
    return img


def _encoded(img: Image.Image) -> bytes:
    """PNG bytes: with a palette when the picture has at most 256 colours (every pixel kept exactly; about half
    the bytes), else RGB."""
    rgb = np.asarray(img.convert("RGB"))
    packed = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
    colours, index = np.unique(packed, return_inverse=True)
    if len(colours) <= 256:
        img = Image.fromarray(index.reshape(packed.shape).astype(np.uint8), "P")
        img.putpalette(np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], 1).astype(np.uint8).tobytes())
    out = io.BytesIO()
    img.save(out, "PNG", optimize=True)
    return out.getvalue()


def heatmap_png(payload: CanvasHeatmap, *, scale: int | None = None, labels: bool = True) -> bytes:
    """The payload as PNG bytes: its cells (`scale` px each; default auto_scale) with, when `labels`, its title,
    axes and colour bar around them (frame(payload, scale) says where the cells are)."""
    scale = scale or auto_scale(payload)
    return _encoded(_labelled(payload, scale) if labels else cells_image(payload, scale))
