"""The canvas heatmaps' payload (attention.figures.canvas): what Python sends is what it meant to draw."""

import numpy as np
import plotly.colors as pc

from attention.figures import head_grid, view_heatmap
from attention.figures.canvas import (
    COLOURS,
    MAGIC,
    NO_COLOUR,
    CanvasHeatmap,
    colour_index,
    grid_canvas,
    palette,
    view_canvas,
)
from attention.models.recorded.views import MatrixView, Reading


def _view(matrix, *, mask=None, window=None, log=False, zmax=1.0, block=1):
    n, m = matrix.shape
    return MatrixView(matrix=matrix, row_labels=tuple(f"q{i}" for i in range(n)),
                      col_labels=tuple(f"<k{j}>" for j in range(m)), mask=mask, title="Layer 1, head 1",
                      value_name="weight", zmax=zmax, block=block, window=window, reading=Reading(log=log))


def test_a_payload_reads_back_as_it_was_written():
    rng = np.random.default_rng(0)
    tokens = ("[CLS]", "<b>", "“a”", "ü", "x", "[SEP]")  # what the hover names each query and key by
    grid = grid_canvas(rng.random((3, 4, 6, 6)), hover_extra=rng.random((3, 4)), hover_label="sink mass",
                       layer_kinds=("global", "local, window 4", "global"), tokens=tokens)
    back = CanvasHeatmap.from_bytes(grid.to_bytes())
    assert grid.to_bytes()[:4] == MAGIC and back.header() == grid.header() and back.tiles.tokens == tokens
    assert grid_canvas(rng.random((3, 4, 3, 3)), block=2, tokens=tokens).tiles.tokens == ()  # blocks: positions
    np.testing.assert_array_equal(back.colour, grid.colour)
    np.testing.assert_array_equal(back.values, grid.values)  # NaN where NaN: float32 travels exactly


def test_the_grid_puts_each_head_in_its_tile_with_gaps_between():
    rng = np.random.default_rng(1)
    tiles, extra = rng.random((3, 4, 5, 6)), rng.random((3, 4))
    grid = grid_canvas(tiles, hover_extra=extra, hover_label="sink mass")
    plotly_z = np.asarray(head_grid(tiles).data[0].z, dtype=float)  # the Plotly figure's layout of the same tiles
    assert grid.shape == plotly_z.shape == (3 * 6 - 1, 4 * 7 - 1)
    for layer, head in ((0, 0), (2, 3), (1, 2)):
        cells = np.s_[layer * 6:layer * 6 + 5, head * 7:head * 7 + 6]
        np.testing.assert_allclose(grid.values[cells], tiles[layer, head], rtol=1e-6)
    np.testing.assert_array_equal(np.isnan(grid.values), np.isnan(plotly_z))
    assert (grid.colour[np.isnan(grid.values)] == NO_COLOUR).all()
    assert grid.tiles.extra == tuple(int(round(x * 100)) for x in extra.ravel())
    for k, tile in enumerate(tiles.reshape(-1, *tiles.shape[2:])):  # the keyboard's summary of a tile
        rows = [max(v for v in row if np.isfinite(v)) for row in tile if np.isfinite(row).any()]
        assert abs(grid.tiles.row_peak[k] - sum(rows) / len(rows)) < 1e-6
    assert [label for _, label in grid.x_ticks] == ["1", "2", "3", "4"] and grid.click == "tile"


def test_colours_follow_the_value_and_the_palette_is_plotlys_scale():
    values = np.array([[0.0, 0.25, 1.0, np.nan]])
    steps = colour_index(values, 0.0, 1.0)
    assert steps.tolist() == [[0, round(0.25 * (COLOURS - 1)), COLOURS - 1, NO_COLOUR]]
    logged = colour_index(np.array([[1e-6, 1e-4, 1e-2, 1.0]]), 0.0, 1.0, log=True)
    assert logged.tolist() == [[0, 0, round((COLOURS - 1) / 2), COLOURS - 1]]
    blues = pc.get_colorscale("Blues")
    ends = [pc.unlabel_rgb(pc.convert_colors_to_same_type(c)[0][0]) for c in (blues[0][1], blues[-1][1])]
    first, last = palette("Blues")[0], palette("Blues")[-1]
    assert [int(first[i:i + 2], 16) for i in (1, 3, 5)] == [round(x) for x in ends[0]]
    assert [int(last[i:i + 2], 16) for i in (1, 3, 5)] == [round(x) for x in ends[1]]
    assert len(palette("Blues")) == COLOURS


def test_a_view_keeps_its_mask_labels_and_window_as_the_plotly_heatmap_does():
    n = 8
    causal = np.tril(np.ones((n, n), bool))
    w = np.where(causal, 1.0, 0.0) / causal.sum(1, keepdims=True)
    view = _view(w, mask=causal, window=4)
    drawn = view_canvas(view, clickable=True, meta={"layer": 0, "head": 0, "token": None})
    assert (drawn.colour[~causal] == NO_COLOUR).all() and np.isnan(drawn.values[~causal]).all()
    np.testing.assert_allclose(drawn.values[causal], w[causal], rtol=1e-6)
    assert drawn.x_names == view.col_labels and drawn.y_names == view.row_labels  # "<k0>" as data, not markup
    shape = view_heatmap(view).layout.shapes[0]  # the Plotly figure's window edge
    (line,) = drawn.lines
    assert (line["x0"], line["y0"], line["x1"], line["y1"]) == (shape.x0, shape.y0, shape.x1, shape.y1)
    assert drawn.click == "cell" and drawn.show_values and drawn.meta["layer"] == 0


def test_log_colours_label_the_bar_in_weights_and_a_norm_scales_to_its_largest_value():
    w = np.full((3, 3), 1 / 3)
    assert [label for _, label in view_canvas(_view(w, log=True)).colorbar] == ["0.0001", "0.001", "0.01", "0.1", "1"]
    norms = view_canvas(_view(np.array([[0.5, 2.0], [4.0, 1.0]]), zmax=None))
    assert norms.colorbar[-1][1] == "4" and norms.colour.max() == COLOURS - 1
    assert view_canvas(_view(np.zeros((2, 2)), zmax=None)).colour.max() == 0  # nothing to scale: no error


def test_the_figures_front_draws_the_toy_side_without_torch_and_every_name_it_lists_resolves():
    """Toy pages import attention.figures: its toy, base and canvas names load with numpy and Plotly only (a
    fresh interpreter: torch is not imported); a model figure's module loads when first asked for."""
    import subprocess
    import sys

    import attention.figures as f

    probe = ("import sys, numpy, attention.figures as f; f.weights_bar(['a'], [1.0]); "
             "f.grid_canvas(numpy.zeros((1, 1, 2, 2))); print('torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False"], run.stdout + run.stderr
    assert [name for name in f.__all__ if getattr(f, name, None) is None] == []  # the lazy ones load here
    assert f.view_heatmap.__module__ == "attention.figures.models"


def test_any_matrix_keeps_its_signed_colours_centred_on_zero():
    from attention.figures import SIGNED, matrix_canvas

    z = np.array([[-2.0, 0.0, 1.0], [0.5, np.nan, -0.5]])
    drawn = matrix_canvas(z, ["a", "b", "c"], ["<q>", "k"], colours=SIGNED, value_name="product")
    middle = (COLOURS - 1) / 2
    assert drawn.colour[0, 1] == round(middle) and drawn.colour[0, 0] == 0  # 0 in the middle, -2 at the bottom
    assert drawn.colour[0, 2] == round(middle + middle / 2) and drawn.colour[1, 1] == NO_COLOUR
    assert drawn.colorbar[0][1] == "-2" and drawn.colorbar[-1][1] == "2" and drawn.y_names == ("<q>", "k")
    assert drawn.palette == palette("RdBu")
