"""What the teacher's view shows of a class's answers: for each question, how many chose each choice, the share
right and the most common wrong answers with the reveal's why; and the answers as CSV.

    rows = class_answers(teacher)                                  # attention.classroom.classes
    summarize(rows, (("lookup.winner", "lookup", ("apple", ...)), ...))
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from attention.classroom.classes import AnswerRow


@dataclass(frozen=True)
class QuestionSummary:
    """One question's answers in a class. The counts, the share right and the wrong answers are the predictions
    made before the page was opened whole; the late ones (made with the answer on screen) are counted apart, so
    the bars do not flatter the class."""

    question: str  # its key, "lookup.winner"
    page: str
    counts: tuple[tuple[str, int], ...]  # (choice, students who chose it in time), every choice in the question's order
    answered: int  # students who answered before the page was opened whole
    judged: int  # of them, answers judged (a model question is judged once its page ran)
    right: int
    answer: str | None  # the right choice, as the class's judged answers give it
    wrong: tuple[tuple[str, int, str], ...]  # (choice, students, the reveal's why), most chosen first, in time
    late_counts: tuple[tuple[str, int], ...] = ()  # (choice, students who chose it after the page was opened)
    late_right: int = 0  # of the late answers judged, how many were right

    @property
    def late(self) -> int:
        """Students who answered only after the page was opened whole (for the class, or by themselves)."""
        return sum(n for _, n in self.late_counts)

    @property
    def share_right(self) -> float | None:
        """Right answers over judged ones, of the answers given in time (None before any is judged)."""
        return self.right / self.judged if self.judged else None

    def share(self, choice: str) -> float:
        """The share of the students who answered in time that chose `choice`."""
        return dict(self.counts).get(choice, 0) / self.answered if self.answered else 0.0


def summarize(rows: Iterable[AnswerRow], questions: Sequence[tuple[str, str, Sequence[str]]]
              ) -> tuple[QuestionSummary, ...]:
    """One summary per question in `questions` ((key, page, choices), in the order the lesson asks them)."""
    by_question: dict[str, list[AnswerRow]] = {}
    for row in rows:
        by_question.setdefault(row.question, []).append(row)
    summaries = []
    for key, page, choices in questions:
        given = by_question.get(key, [])
        answers, late = [a for a in given if not a.late], [a for a in given if a.late]
        chosen, chosen_late = Counter(a.choice for a in answers), Counter(a.choice for a in late)
        judged = [a for a in answers if a.right is not None]
        answer = next((a.answer for a in given if a.right is not None), None)
        why = next((a.why for a in given if a.right is not None and a.why), "")
        wrong = Counter(a.choice for a in judged if not a.right)
        summaries.append(QuestionSummary(
            key, page, tuple((c, chosen.get(c, 0)) for c in choices), len(answers), len(judged),
            sum(bool(a.right) for a in judged), answer, tuple((c, n, why) for c, n in wrong.most_common()),
            tuple((c, chosen_late.get(c, 0)) for c in choices), sum(bool(a.right) for a in late)))
    return tuple(summaries)


CSV_COLUMNS = ("student", "page", "question", "first_prediction", "answer", "right", "attempts", "choice_now",
               "answered_at_utc", "after_page_opened")


def _cell(value: object) -> str:
    """A cell a spreadsheet reads as text: one starting with =, +, -, @ (a formula to Excel) gets a quote first."""
    text = "" if value is None else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def answers_csv(rows: Iterable[AnswerRow]) -> str:
    """The answers as CSV, one row per student and question (CSV_COLUMNS): the first prediction and whether it was
    right, how many times the question was answered, the choice now, and whether the first prediction was made
    after the page was opened whole (the answer on screen)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for a in rows:
        writer.writerow([_cell(v) for v in (a.student, a.page, a.question, a.choice, a.answer,
                                              "" if a.right is None else ("yes" if a.right else "no"), a.attempts,
                                              a.last_choice, a.answered_at.isoformat(timespec="seconds"),
                                              "yes" if a.late else "no")])
    return out.getvalue()
