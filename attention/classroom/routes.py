"""Routes through the pages: which pages a class follows, in what order, and how long each takes.

A page's minutes are measured, not guessed: `make bench` (benchmarks/lesson_minutes.py) opens every page as a
student would, whole, and counts what it asks of them (words to read, questions to predict, charts and controls
to try); MINUTES_FILE keeps the figures and how they were reckoned. A route's minutes are its pages' sum.

    ROUTES["toy-45"].pages            # ("lookup", "self_attention", ...)
    minutes("lookup")                 # 13
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

MINUTES_FILE = Path(__file__).with_name("minutes.json")


@dataclass(frozen=True)
class Route:
    title: str
    pages: tuple[str, ...]  # URL names ("lookup"), in order
    line: str  # what it covers, for the teacher choosing

    @property
    def minutes(self) -> int:
        """The measured minutes of its pages, summed."""
        return sum(minutes(page) for page in self.pages)


WHOLE_PATH = ("lookup", "self_attention", "scaling", "multihead", "positions", "bottleneck", "model_heads",
              "inside_head", "ambiguous_words", "predictions", "what_heads_do")

ROUTES = {
    "toy-45": Route("Attention in 45 minutes", ("lookup", "self_attention", "scaling"),
                    "The toy pages: attention as a soft lookup, self-attention step by step on “Thinking Machines”, "
                    "and why the scores are divided by √d. No pretrained model: every page answers at once."),
    "real-45": Route("Real heads in 45 minutes", ("self_attention", "model_heads", "ambiguous_words"),
                     "Self-attention step by step, then a real model's heads: what each word looks at, and how "
                     "“bank” and “it” are read in two sentences."),
    "path": Route("The whole path", WHOLE_PATH,
                  "From a toy lookup to what a real model's heads do: several lessons."),
}


@cache
def measured() -> dict:
    """The measurement MINUTES_FILE keeps: {"pages": {name: {"minutes": ..., "words": ..., ...}}, "reckoning": ...}."""
    try:
        return json.loads(MINUTES_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"pages": {}, "reckoning": ""}


def minutes(page: str) -> int:
    """The measured minutes of `page` (URL name); 0 for a page not measured."""
    return int(measured()["pages"].get(page, {}).get("minutes", 0))
