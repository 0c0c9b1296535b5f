"""The head census as figures (issue 73): one published score of every head, layers down and heads across, the
heads above the metric's threshold boxed; the page "What each head is" and notebooks draw the same builder."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from attention.figures.base import SIGNED, Colours
from attention.figures.canvas import CanvasHeatmap, layer_head_canvas

BOX = "#d62728"  # the threshold's boxes: red beside the blues of the scale
OPENED = "#111111"  # the head open below the map


def census_canvas(scores: np.ndarray, *, label: str, threshold: float, signed: bool = False,
                  click_text: str = "", file_name: str = "census", opened: tuple[int, int] | None = None
                  ) -> CanvasHeatmap:
    """`scores` (L, H) of one metric (attention.models.Census.scores[key]) as a canvas heatmap, each head above
    `threshold` boxed in red; `signed` for a score from −1 to 1 (copying), else 0 to 1 or its maximum. The title
    names the threshold; a click (with `click_text`) reports the head, from 0. `opened` (layer, head), from 0:
    the head the page has open below, boxed in black a little inside its cell."""
    scores = np.asarray(scores, dtype=np.float64)
    L, H = scores.shape
    high = max(1.0, float(np.nanmax(scores))) if scores.size else 1.0
    colours = SIGNED if signed else Colours(0.0, high)
    passed = int((scores > threshold).sum())
    title = f"{label}: {passed} of {L * H} heads above {threshold:g} (boxed)"
    canvas = layer_head_canvas(scores, title=title, value_name=label, colours=colours, show_values=L * H <= 144,
                               height=min(1400, 140 + 26 * L), click_text=click_text, file_name=file_name)
    boxes = []
    for layer, head in zip(*np.nonzero(scores > threshold), strict=True):
        left, right, top, bottom = head - 0.5, head + 0.5, layer - 0.5, layer + 0.5
        boxes += [{"x0": x0, "y0": y0, "x1": x1, "y1": y1, "colour": BOX, "text": ""}
                  for x0, y0, x1, y1 in ((left, top, right, top), (right, top, right, bottom),
                                         (right, bottom, left, bottom), (left, bottom, left, top))]
    if opened is not None and 0 <= opened[0] < L and 0 <= opened[1] < H:
        left, right, top, bottom = opened[1] - 0.38, opened[1] + 0.38, opened[0] - 0.38, opened[0] + 0.38
        boxes += [{"x0": x0, "y0": y0, "x1": x1, "y1": y1, "colour": OPENED, "text": ""}
                  for x0, y0, x1, y1 in ((left, top, right, top), (right, top, right, bottom),
                                         (right, bottom, left, bottom), (left, bottom, left, top))]
    return replace(canvas, lines=tuple(boxes), export_title=title)
