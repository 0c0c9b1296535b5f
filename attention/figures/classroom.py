"""The teacher's view of a class: one question's answers as bars (attention.classroom.QuestionSummary), the right
choice marked, each bar labelled with its count and share."""

from __future__ import annotations

import plotly.graph_objects as go

from attention.figures.base import esc
from attention.toy.rounding import percent

RIGHT, WRONG, UNJUDGED = "#2e7d32", "#c0504d", "#7fa7e0"


def class_answers(summary, *, shown=str) -> go.Figure:
    """How many students chose each choice of one question (`summary`: attention.classroom.QuestionSummary), the
    right choice green and the others red once judged (blue before). `shown` writes a choice as the page does
    (a token's leading space as ␣)."""
    choices = [c for c, _ in summary.counts]
    counts = [n for _, n in summary.counts]
    colours = [UNJUDGED if summary.answer is None else RIGHT if c == summary.answer else WRONG for c in choices]
    labels = [esc(shown(c)) + (" ✓" if c == summary.answer else "") for c in choices]
    rows = list(range(len(choices)))
    fig = go.Figure(go.Bar(
        y=rows, x=counts, orientation="h", marker_color=colours, cliponaxis=False, textposition="outside",
        text=[f"{n} ({percent(summary.share(c))})" if summary.answered else "0" for c, n in zip(choices, counts,
                                                                                             strict=True)],
        customdata=labels, hovertemplate="%{customdata}: %{x} students<extra></extra>"))
    top = max(counts, default=0) or 1
    fig.update_layout(height=70 + 34 * len(choices), margin=dict(l=10, r=60, t=10, b=30), showlegend=False)
    fig.update_xaxes(range=[0, top * 1.35], title=dict(text="students"), dtick=max(1, top // 5) if top > 5 else 1)
    fig.update_yaxes(autorange="reversed", automargin=True, tickmode="array", tickvals=rows, ticktext=labels)
    return fig
