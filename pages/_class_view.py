"""What the teacher's control view (pages/classroom.py) and the class's board (pages/board.py) both draw: a lesson's
questions, the join link, and one question's answers as a card (attention.figures.class_answers)."""

from urllib.parse import urljoin

import streamlit as st

from attention.classroom import QuestionSummary
from attention.figures import class_answers as class_answers_chart
from pages._lessons import shown_choice
from pages._site import entry
from pages._text import md


def lesson_questions(pages: tuple[str, ...]) -> list:
    """The questions of `pages` (URL names), in the route's order: the toy pages' and the model pages'."""
    from attention.toy.questions import questions_for

    found = []
    for page in pages:
        found += questions_for(page)
        if not questions_for(page):
            from attention.models import model_questions_for  # imports torch: only when a model page is asked

            found += model_questions_for(page)
    return found


def title(page: str) -> str:
    """A page's title by its URL name."""
    return entry(f"pages/{page}.py").title


def join_link(code: str) -> str:
    """The address a student types or scans to join the class `code` (the class page, the code filled in)."""
    return urljoin(str(st.context.url or "").split("?")[0], f"classroom?join={code}")


def counted(summary: QuestionSummary) -> str:
    """The answers in words: how many answered before the page was opened, the share right, and the late ones
    counted apart."""
    right = summary.share_right
    said = f"{summary.answered} answered" + ("" if right is None else
                                              f"; {right:.0%} right (the answer: {md(shown_choice(summary.answer))})")
    if summary.late:
        said += (f"; {summary.late} more answered after the page was opened, with the answer on screen (not counted"
                 f", hatched)")
    return said


def answers_card(n: int, question, summary: QuestionSummary, *, large: bool = False, whys: bool = True) -> None:
    """Question `n`'s answers: what it asked, the counts in words and as bars, and (`whys`) the most common wrong
    answers with what they reveal."""
    st.markdown(f"{'### ' if large else ''}**{n}. {md(title(question.page))}** · {md(question.ask)}")
    if not (summary.answered or summary.late):
        st.caption("No answers yet.")
        return
    (st.markdown if large else st.caption)(counted(summary))
    st.plotly_chart(class_answers_chart(summary, shown=shown_choice, large=large),
                    key=f"classroom.chart.{question.key}", config={"displayModeBar": False})
    for choice, count, why in summary.wrong[:2] if whys else ():  # the most common wrong answers, what they reveal
        st.caption(f"{count} chose “{md(shown_choice(choice))}”: {md(question.misconception(choice))}. "
                   f"Why the answer is otherwise: {md(why)}")
