"""Figure builders: pooling keeps maxima, the grid names its tiles, large heatmaps stay small on the wire,
colour options reach the trace."""

import numpy as np
import pytest

from attention import figures
from attention.models.recorded.views import pool_max

rng = np.random.default_rng(7)


def test_pool_max_equals_block_maxima():
    w = rng.random((2, 3, 64, 64)).astype(np.float32)
    pooled, block = pool_max(w, 16)
    expected = np.array([[[[w[a, h, 4 * i:4 * i + 4, 4 * j:4 * j + 4].max() for j in range(16)] for i in range(16)]
                          for h in range(3)] for a in range(2)])
    assert block == 4
    np.testing.assert_array_equal(pooled, expected)
    odd = rng.random((1, 1, 50, 50)).astype(np.float32)
    assert pool_max(odd, 16)[0][0, 0, -1, -1] == odd[0, 0, 48:, 48:].max()
    assert pool_max(odd, 64)[0] is odd  # small enough: untouched


def test_head_grid_coordinates_round_to_their_tile():
    w = rng.random((3, 4, 10, 10))
    trace = figures.head_grid(w, hover_extra=rng.random((3, 4)), hover_label="sink").data[0]
    x, y, z = np.asarray(trace.x), np.asarray(trace.y), np.asarray(trace.z)
    c = 10
    for layer in range(3):
        for head in range(4):
            rows, cols = slice(layer * (c + 1), layer * (c + 1) + c), slice(head * (c + 1), head * (c + 1) + c)
            np.testing.assert_allclose(z[rows, cols], w[layer, head], rtol=1e-6)
            assert set(np.round(x[cols]).astype(int)) == {head + 1}  # hover "head %{x:.0f}" names it
            assert set(np.round(y[rows]).astype(int)) == {layer + 1}
    assert np.isnan(z[c, :]).all() and np.isnan(z[:, c]).all()  # gaps between tiles


def test_large_heatmap_uses_a_template_not_per_cell_strings():
    fig = figures.heatmap(rng.random((512, 512)), [f"t{i}" for i in range(512)], [f"t{i}" for i in range(512)])
    trace = fig.data[0]
    assert trace.hovertext is None and "%{z" in trace.hovertemplate
    assert len(fig.to_json()) < 2e6  # 512 x 512 float32 as base64 (~1.4 MB), not 262,144 hover strings
    assert len(set(trace.x)) == 512  # "position·token" keeps repeated tokens apart


def test_colour_options_reach_the_trace_and_log_colours_keep_the_values_on_hover():
    z = np.array([[0.001, 0.999], [0.5, 0.5]])
    signed = figures.heatmap(z - 0.5, ["a", "b"], ["c", "d"], colours=figures.SIGNED).data[0]
    plain = figures.heatmap(z, ["a", "b"], ["c", "d"]).data[0]
    assert signed.zmid == 0 and plain.zmid is None and signed.colorscale != plain.colorscale
    logged = figures.heatmap(z, ["a", "b"], ["c", "d"], colours=figures.WEIGHTS.logged(True)).data[0]
    np.testing.assert_allclose(np.asarray(logged.z, float), np.log10(z))
    assert (logged.zmin, logged.zmax) == (np.log10(figures.LOG_FLOOR), 0.0)
    assert "0.50" in logged.hovertext[1][0]  # hover says the weight, not its logarithm
    no_bar = figures.heatmap(z, ["a", "b"], ["c", "d"], colours=figures.Colours(0.0, 1.0, bar=False)).data[0]
    assert no_bar.showscale is False
    grouped = figures.heatmap(np.zeros((6, 2)), ["a", "b"], [f"L{i // 3 + 1} H{i % 3 + 1}" for i in range(6)],
                               ticks=figures.Ticks(row_groups=3))
    assert list(grouped.layout.yaxis.ticktext) == ["L1", "L2"]


@pytest.mark.parametrize("lo,hi", [(0.02, 0.09), (0.004, 0.03), (1e-5, 0.5), (1.0, 1000.0), (0.11, 0.35)])
def test_a_log_axis_has_several_labels_inside_its_curves(lo, hi):
    """Head atlas's distance chart, within one decade, had a single y label: every tick lies inside the
    curves' range, is a 1-9 multiple of a power of ten, and there are at least three (two over less than a
    factor of four)."""
    from attention.figures import line_chart

    fig = line_chart([1, 2, 3], {"a": [lo, (lo * hi) ** 0.5, hi]}, log_y=True)
    ticks = fig.layout.yaxis.tickvals
    assert len(ticks) >= (3 if hi / lo >= 4 else 2), ticks
    assert all(lo * 0.999 <= t <= hi * 1.001 for t in ticks), ticks
    assert all(round(t / 10 ** np.floor(np.log10(t)), 6) in range(1, 10) for t in ticks), ticks
    assert list(fig.layout.yaxis.ticktext) == [f"{t:g}" for t in ticks]
