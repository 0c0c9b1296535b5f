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
    question: str  # its key, "lookup.winner"
    page: str
    counts: tuple[tuple[str, int], ...]  # (choice, students who chose it), every choice in the question's order
    answered: int  # students who answered
    judged: int  # of them, answers judged (a model question is judged once its page ran)
    right: int
    answer: str | None  # the right choice, as the class's judged answers give it
    wrong: tuple[tuple[str, int, str], ...]  # (choice, students, the reveal's why), most chosen first

    @property
    def share_right(self) -> float | None:
        """Right answers over judged ones (None before any is judged)."""
        return self.right / self.judged if self.judged else None

    def share(self, choice: str) -> float:
        """The share of the students who answered that chose `choice`."""
        return dict(self.counts).get(choice, 0) / self.answered if self.answered else 0.0


def summarize(rows: Iterable[AnswerRow], questions: Sequence[tuple[str, str, Sequence[str]]]
              ) -> tuple[QuestionSummary, ...]:
    """One summary per question in `questions` ((key, page, choices), in the order the lesson asks them)."""
    by_question: dict[str, list[AnswerRow]] = {}
    for row in rows:
        by_question.setdefault(row.question, []).append(row)
    summaries = []
    for key, page, choices in questions:
        answers = by_question.get(key, [])
        chosen = Counter(a.choice for a in answers)
        judged = [a for a in answers if a.right is not None]
        answer = next((a.answer for a in judged), None)
        why = next((a.why for a in judged if a.why), "")
        wrong = Counter(a.choice for a in judged if not a.right)
        summaries.append(QuestionSummary(
            key, page, tuple((c, chosen.get(c, 0)) for c in choices), len(answers), len(judged),
            sum(bool(a.right) for a in judged), answer, tuple((c, n, why) for c, n in wrong.most_common())))
    return tuple(summaries)


CSV_COLUMNS = ("student", "page", "question", "first_prediction", "answer", "right", "attempts", "choice_now",
               "answered_at_utc")


def _cell(value: object) -> str:
    """A cell a spreadsheet reads as text: one starting with =, +, -, @ (a formula to Excel) gets a quote first."""
    text = "" if value is None else str(value)
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def answers_csv(rows: Iterable[AnswerRow]) -> str:
    """The answers as CSV, one row per student and question (CSV_COLUMNS): the first prediction and whether it was
    right, how many times the question was answered, and the choice now."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for a in rows:
        writer.writerow([_cell(v) for v in (a.student, a.page, a.question, a.choice, a.answer,
                                              "" if a.right is None else ("yes" if a.right else "no"), a.attempts,
                                              a.last_choice, a.answered_at.isoformat(timespec="seconds"))])
    return out.getvalue()
