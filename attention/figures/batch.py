"""Figures of the analyses over a batch of prompt pairs (attention.models: logit_differences, batch_attribution,
batch_patching): the page "A batch of prompts" and notebooks (examples/ioi.ipynb) draw the same ones.

    m_rows(m_of)                      m on the clean and corrupted prompts and their gap: mean, std, min, max
    prompt_strip(series, prompts)     one point per prompt, a row per series (m clean and corrupted; a head's
                                      share), each row's mean ± std beside its points
    attribution_canvas(dla)           every head's mean direct share of m, layers down, heads across (a canvas)
    head_rows(dla, k)                 the k heads of largest mean |share| as table rows: L24H4, mean, std, min, max
    parts_gap(dla)                    how far the parts' sum is from the model's own m, at worst over the prompts
    patching_canvas(patched)          the mean recovery at every stream x position (a canvas)
    counted_prompts(patched)          how many prompts those means count
    patching_rows(patched)            each position patching changed: the streams restoring half or more, the one
                                      restoring most, with its spread

numpy and Plotly only: the results are read by their fields (BatchAttribution, BatchPatching, LogitDifferences),
never recomputed. Heads are named L24H4 and layers L1.. on screen, counting from 1; arrays count from 0.
Shapes: B prompts, L layers, H heads, P positions patched.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attention.figures.base import SIGNED, esc
from attention.figures.canvas import CanvasHeatmap, layer_head_canvas, matrix_canvas
from attention.focus import with_visible_spaces

SERIES_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")  # one per row of a strip, in order
PROMPT_CHARS = 110  # a prompt in a hover: its beginning and its end (where the next token is read) around "…"
JITTER = 0.28  # how far a strip's points spread around their row, up and down (rows are 1 apart)


def short_prompt(text: str, chars: int = PROMPT_CHARS) -> str:
    """A prompt cut to about `chars` characters for a hover: its start and its end, which the prediction follows."""
    if len(text) <= chars:
        return text
    end = chars * 2 // 3
    return text[:chars - end - 1] + "…" + text[-end:]


M_ROWS = {"clean": "clean prompts", "corrupted": "corrupted prompts", "gap": "clean − corrupted"}


def m_rows(m_of) -> list[dict]:
    """m = logit(target) − logit(foil) over the prompts as table rows (LogitDifferences.spread): on the clean
    prompts, the corrupted ones, and the gap between a pair's two, each with its mean, std (ddof 0), min and max."""
    rows = []
    for which, label in M_ROWS.items():
        s = m_of.spread(which)
        rows.append({"m on": label, "mean": float(s.mean), "std": float(s.std), "min": float(s.min),
                     "max": float(s.max)})
    return rows


def prompt_strip(series: dict[str, np.ndarray], prompts, *, title: str = "", x_title: str = "m") -> go.Figure:
    """One point per prompt and a row per series ({"clean": m_clean, "corrupted": m_corrupt}), spread a little up
    and down so that equal values stay visible (the same spread at every draw), the prompt on hover; each row's
    mean ± std (ddof 0) as a black diamond with a bar; a dashed line at 0. NaN values are left out.
    Shapes: each series (B,), prompts B strings."""
    prompts = [esc(short_prompt(str(p))) for p in prompts]
    names = list(series)
    fig = go.Figure()
    for row, (name, values) in enumerate(series.items()):
        v = np.asarray(values, dtype=np.float64)
        kept = np.flatnonzero(np.isfinite(v))
        offsets = ((kept * 0.6180339887) % 1.0 - 0.5) * 2 * JITTER  # golden-ratio steps: even, and repeatable
        fig.add_trace(go.Scatter(
            x=v[kept], y=row + offsets, mode="markers", name=esc(name), showlegend=False,
            marker=dict(size=7, color=SERIES_COLOURS[row % len(SERIES_COLOURS)], opacity=0.6),
            customdata=np.stack([kept + 1, [prompts[i] for i in kept]], 1) if len(kept) else None,
            hovertemplate=f"{esc(name)}, prompt %{{customdata[0]}}: %{{x:.3f}}<br>%{{customdata[1]}}<extra></extra>"))
        if len(kept):
            mean, std = float(v[kept].mean()), float(v[kept].std())
            fig.add_trace(go.Scatter(
                x=[mean], y=[row], mode="markers", showlegend=False, name=f"{esc(name)} mean",
                marker=dict(size=12, color="black", symbol="diamond"),
                error_x=dict(type="constant", value=std, color="black", thickness=2, width=8),
                hovertemplate=f"{esc(name)}: mean {mean:.3f} ± {std:.3f} (std over {len(kept)} prompts)"
                              "<extra></extra>"))
    fig.add_vline(x=0, line=dict(color="#7f7f7f", dash="dash", width=1))
    fig.update_layout(title=dict(text=esc(title)), height=110 + 80 * len(names),
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(names))), ticktext=[esc(n) for n in names],
                     range=[len(names) - 0.5, -0.5], automargin=True)
    fig.update_xaxes(title_text=esc(x_title), zeroline=False)
    return fig


def attribution_canvas(dla, *, click_text: str = "", file_name: str = "batch_direct_attribution") -> CanvasHeatmap:
    """Every head's direct share of m, its mean over the prompts (BatchAttribution.spread("heads").mean), layers
    down and heads across from 1, red below 0 and blue above. A click (with `click_text`) reports the head's
    cell: row = layer, col = head, from 0. Shapes: dla.heads (B, L, H) -> cells (L, H)."""
    return layer_head_canvas(dla.spread("heads").mean, title=f"Direct share of m, mean of {len(dla.heads)} prompts",
                             value_name="share", colours=SIGNED, click_text=click_text,
                             file_name=file_name)


def head_rows(dla, k: int = 10) -> list[dict]:
    """The k heads of largest mean |share| (BatchAttribution.top_heads), one table row each: the head as pages
    name it (L24H4), its mean share of m and the spread over prompts (std ddof 0, min, max), and the share of
    prompts on which it pushes towards the target (share > 0)."""
    spread = dla.spread("heads")
    rows = []
    for name, mean in dla.top_heads(k):  # a HeadName: str() says L24H4, HeadName.parse reads it back
        at = (name.layer, name.head)
        towards = float((dla.heads[(slice(None), *at)] > 0).mean())  # (B,) -> the share of prompts
        rows.append({"head": str(name), "mean": mean, "std": float(spread.std[at]), "min": float(spread.min[at]),
                     "max": float(spread.max[at]), "towards the target": towards})
    return rows


def parts_gap(dla) -> float:
    """The largest |sum of every part's share − the model's own m| over the prompts: how exactly the direct shares
    add up (float32 rounding). Shapes: dla.total, dla.model (B,) -> a float."""
    return float(np.max(np.abs(dla.total - dla.model)))


def stream_names(n_rows: int) -> list[str]:
    """The rows of a residual patching: the stream entering each layer (L1 ..), then the one leaving the last
    ("final", what the final norm reads)."""
    return [f"L{layer + 1}" for layer in range(n_rows - 1)] + ["final"]


def position_names(patched) -> list[str]:
    """Each patched position as "9 S2" or "5 ␣to": its index from 0 in every prompt and what stands there (the
    token all prompts share, ␣ for its space, or its role IO, S1, S2); "last" when each prompt's last token was
    patched."""
    return ["last" if p < 0 else f"{p} {with_visible_spaces(label)}"
            for p, label in zip(patched.positions, patched.labels, strict=True)]


def patching_canvas(patched, *, file_name: str = "batch_patching") -> CanvasHeatmap:
    """The recovery of m, (m_patched − m_corrupt) / (m_clean − m_corrupt), averaged over the prompts that count
    (BatchPatching.spread().mean), at every stream (rows) and position (columns); 1 restores the clean m, 0
    changes nothing. Shapes: patched.recovery (B, L + 1, P) -> cells (L + 1, P)."""
    summary = patched.spread()
    rows = summary.mean.shape[0]
    return matrix_canvas(summary.mean, position_names(patched), stream_names(rows),
                         title=f"Recovery of m when the clean stream is patched in, mean of "
                               f"{counted_prompts(patched)} prompts",
                         x_title="position (token, or its role: IO, S1, S2)", y_title="stream entering layer",
                         value_name="recovery", colours=SIGNED, show_values=False,
                         height=min(900, 150 + 22 * rows), file_name=file_name)


def counted_prompts(patched) -> int:
    """How many prompts the recovery's means count: those with a gap between their clean and corrupted m
    (BatchPatching: the others are NaN)."""
    n = patched.spread().n
    return int(np.max(n)) if n.size else 0


def patching_rows(patched, half: float = 0.5) -> list[dict]:
    """One table row per position where patching changed anything (the positions before the first difference
    between a clean prompt and its twin hold 0 in every stream): the streams whose mean recovery reaches `half`
    (the first and the last of them), the stream that restores most and its mean with the spread over the prompts
    (std ddof 0, min, max) and how many prompts counted (BatchPatching.spread())."""
    summary = patched.spread()
    mean = np.nan_to_num(summary.mean, nan=0.0)  # (L + 1, P)
    streams, positions = stream_names(mean.shape[0]), position_names(patched)
    rows = []
    for c in np.flatnonzero(np.any(mean != 0.0, axis=0)):
        r = int(np.argmax(mean[:, c]))
        reach = np.flatnonzero(mean[:, c] >= half)
        rows.append({"position": positions[c],
                     f"recovery ≥ {half:g}": f"{streams[reach[0]]} to {streams[reach[-1]]}" if len(reach) else "none",
                     "most at": streams[r], "mean": float(summary.mean[r, c]), "std": float(summary.std[r, c]),
                     "min": float(summary.min[r, c]), "max": float(summary.max[r, c]), "prompts": int(summary.n[r, c])})
    return rows
