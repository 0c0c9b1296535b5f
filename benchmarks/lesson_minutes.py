"""How long each page of a lesson takes, from what the page asks of a student, measured on the page itself.

Each page of the path (and the other pages a route may hold) is opened in AppTest as a student opens it, whole
(its questions marked skipped in the database, so nothing waits), and what it shows is counted: the words of its
text (titles, headers, markdown, captions, alerts, labels), its questions, its charts (Plotly charts and canvas
heatmaps) and its controls (sliders, inputs, selects, toggles). The minutes are reckoned from those counts at
the rates below, stated rather than hidden, and written to attention/classroom/minutes.json, where the routes
and every page's "about N min" read them.

    python -m benchmarks.lesson_minutes           # make bench runs it

The rates: a student reads a page meant for study at READ_WPM words a minute (silent reading of non-fiction runs
near 238 wpm, Brysbaert 2019; text with formulas to follow, slower); a question takes QUESTION_MIN (read it,
predict, commit, read the answer's why); a chart CHART_MIN to read; a control CONTROL_MIN to try. A class's own
timing (the soak's teacher view records when each answer arrived) is the check on these rates.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from pathlib import Path

READ_WPM = 150
QUESTION_MIN = 2.0
CHART_MIN = 0.5
CONTROL_MIN = 0.5
OUT = Path(__file__).resolve().parent.parent / "attention" / "classroom" / "minutes.json"
TEXT_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "info", "success", "warning", "error",
                 "text", "latex")
CONTROLS = ("slider", "select_slider", "number_input", "text_input", "text_area", "selectbox", "radio", "toggle",
            "checkbox", "multiselect")


def _words(text: str) -> int:
    return len(re.findall(r"[\w′’'-]+", str(text)))


def measure(page: str) -> dict:
    """What `page` (URL name) shows a student, opened whole, and its minutes."""
    from streamlit.testing.v1 import AppTest

    from attention.classroom import mark_skipped, new_token
    from attention.models import model_questions_for
    from attention.toy.questions import questions_for

    token = new_token()
    mark_skipped(token, page)
    at = AppTest.from_file(str(OUT.parents[2] / "app.py"), default_timeout=600)
    at.session_state["learner.token"] = token
    at.run()
    at.switch_page(f"pages/{page}.py").run()
    if at.exception:
        raise RuntimeError(f"{page}: {at.exception[0].value}")
    words = sum(_words(getattr(e, "value", "") or getattr(e, "body", "")) for kind in TEXT_ELEMENTS
                for e in getattr(at, kind, ()))
    controls = sum(len(getattr(at, kind, ())) for kind in CONTROLS)
    words += sum(_words(getattr(e, "label", "")) for kind in CONTROLS for e in getattr(at, kind, ()))
    frame = ("learner.cookie", "prefetch")  # the app frame's components, on every page: not the page's charts
    charts = len(at.get("plotly_chart")) + sum(c.key not in frame for c in at.get("bidi_component"))
    questions = len(questions_for(page)) + len(model_questions_for(page))
    reckoned = words / READ_WPM + questions * QUESTION_MIN + charts * CHART_MIN + controls * CONTROL_MIN
    return {"words": words, "questions": questions, "charts": charts, "controls": controls,
            "minutes": max(1, math.ceil(reckoned))}


def main() -> None:
    from attention.classroom.routes import ROUTES

    os.environ.setdefault("ATTENTION_EXPLORER_DATA", tempfile.mkdtemp(prefix="lesson-minutes-"))
    pages = list(dict.fromkeys(p for route in ROUTES.values() for p in route.pages))
    off_routes = ("toy_ambiguity", "multihead", "scoring", "head_atlas", "compare", "image_model", "corpus")
    pages += [p for p in off_routes if p not in pages]
    measured = {}
    for page in pages:
        start = time.perf_counter()
        measured[page] = measure(page)
        print(f"{page}: {measured[page]} ({time.perf_counter() - start:.1f} s)", flush=True)
    reckoning = (f"words / {READ_WPM} wpm + {QUESTION_MIN} min a question + {CHART_MIN} min a chart + "
                 f"{CONTROL_MIN} min a control, rounded up (benchmarks/lesson_minutes.py)")
    OUT.write_text(json.dumps({"reckoning": reckoning, "pages": measured}, indent=1) + "\n", encoding="utf-8")
    for key, route in ROUTES.items():
        print(f"{key}: {sum(measured[p]['minutes'] for p in route.pages)} min")


if __name__ == "__main__":
    main()
