"""The teacher's view of a class: one question's answers as bars (attention.classroom.QuestionSummary), the right
choice marked, each bar labelled with its count and share; answers given after the page was opened, apart."""

from __future__ import annotations

import plotly.graph_objects as go

from attention.figures.base import esc
from attention.toy.rounding import percent

RIGHT, WRONG, UNJUDGED = "#2e7d32", "#c0504d", "#7fa7e0"


def class_answers(summary, *, shown=str, large: bool = False) -> go.Figure:
    """How many students chose each choice of one question (`summary`: attention.classroom.QuestionSummary), the
    right choice green and the others red once judged (blue before). Answers given after the page was opened
    whole (`summary.late_counts`) are a paler, hatched bar beside them, never added to the share. `shown` writes a
    choice as the page does (a token's leading space as ␣); `large` is the board's type, read from the back of a
    room."""
    choices = [c for c, _ in summary.counts]
    counts = [n for _, n in summary.counts]
    late = dict(summary.late_counts)
    colours = [UNJUDGED if summary.answer is None else RIGHT if c == summary.answer else WRONG for c in choices]
    labels = [esc(shown(c)) + (" ✓" if c == summary.answer else "") for c in choices]
    rows = list(range(len(choices)))
    share = (lambda c: f"{summary.share(c):.0%}") if large else (lambda c: percent(summary.share(c)))
    in_time = [f"{n} ({share(c)})" if summary.answered else "0" for c, n in zip(choices, counts, strict=True)]
    fig = go.Figure(go.Bar(
        y=rows, x=counts, orientation="h", marker_color=colours, cliponaxis=False, name="before the page was opened",
        text=in_time if not summary.late else None, textposition="outside",
        customdata=labels, hovertemplate="%{customdata}: %{x} students before the page was opened<extra></extra>"))
    if summary.late:
        fig.add_bar(y=rows, x=[late.get(c, 0) for c in choices], orientation="h", marker_color=colours,
                    marker_opacity=0.45, marker_pattern_shape="/", name="after (not counted)",
                    cliponaxis=False,
                    text=[f"{t} +{late[c]} late" if late.get(c) else t for t, c in zip(in_time, choices, strict=True)],
                    textposition="outside", customdata=labels,
                    hovertemplate="%{customdata}: %{x} students after the page was opened<extra></extra>")
    top = max((n + late.get(c, 0) for c, n in zip(choices, counts, strict=True)), default=0) or 1
    size = 24 if large else 13
    height = (100 + 64 * len(choices) if large else 70 + 34 * len(choices)) + (40 if summary.late else 0)
    fig.update_traces(textfont=dict(size=size - 4 if large else size, color="#31333f"))  # a phone holds the board too
    fig.update_layout(height=height, margin=dict(l=10, r=60, t=40 if summary.late else 10, b=30), barmode="stack",
                      font=dict(size=size), showlegend=bool(summary.late),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0, traceorder="normal",
                                  font=dict(size=size - 6 if large else size)))
    room = (1.6 if summary.late else 1.35) * (1.35 if large else 1.0)  # for the labels outside the longest bar
    fig.update_xaxes(range=[0, top * room], dtick=max(1, top // 5) if top > 5 else 1,
                     title=dict(text="students", font=dict(size=size)), tickfont=dict(size=size))
    fig.update_yaxes(autorange="reversed", automargin=True, tickmode="array", tickvals=rows, ticktext=labels,
                     tickfont=dict(size=size))
    return fig
