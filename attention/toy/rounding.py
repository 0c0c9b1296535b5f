"""How the toy pages write a number: one rounding rule for a page, its questions and its live charts.

A weight is written to thousandths ("0.296") wherever a toy page says it: a question's sentence and its bars,
the tables, the live sliders (attention.toy.live sends thousandths), the metrics. One rule, so one question
never says 0.30 in its sentence, 0.296 on its bars and something else live; and never in e-notation: a
change of 5.55e-17 (rounding) is written 0.000, as it reads.

    >>> number(0.2957), number(-1e-17), percent(0.2957)
    ('0.296', '0.000', '29.6%')
"""

from __future__ import annotations

DECIMALS = 3  # thousandths: a weight's precision on screen


MINUS = "−"  # U+2212: a minus sign, as Plotly's axes write it, not a hyphen


def number(x: float, *, signed: bool = False) -> str:
    """A number to DECIMALS decimals ("0.296"), a negative one with a minus sign ("−0.120", as the charts' axes
    write it); rounding noise reads 0.000, never −0.000; `signed` writes a plus sign on positive values ("+0.120"),
    as a change or a part of a sum is said."""
    text = f"{float(x):+.{DECIMALS}f}" if signed else f"{float(x):.{DECIMALS}f}"
    zero = f"{0:.{DECIMALS}f}"
    return zero if text.lstrip("+-") == zero else text.replace("-", MINUS)


def percent(x: float) -> str:
    """A share as a percent, to the same thousandths: 0.2957 -> "29.6%"."""
    return f"{float(x) * 100:.{DECIMALS - 2}f}%"
