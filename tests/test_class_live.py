"""A class as it runs: a teacher and three students in Chromium behind `make class` (two app processes, nginx, one
SQLite file): the teacher opens a class on the page, the students join with its code and answer, the teacher's view
counts each answer within seconds, a student reloads and resumes, and a process is killed without losing an answer.
make soak drives a bigger class and measures it (benchmarks/class_soak.py)."""

import os
import signal
import time

import pytest

from serving import running_class
from tests.harness import chromium, page_url, wait_idle

pytestmark = pytest.mark.slow
SEEN_WITHIN_S = 5.0  # the teacher's view reads again every 2 s (pages/classroom.py); the check leaves room


def _answer(page, choice: str) -> float:
    """Commit `choice` for the page's open question; the time the commit was acknowledged (its verdict shown)."""
    verdicts = page.get_by_text("Ask me again")
    before = verdicts.count()
    page.locator("[data-testid=stRadio] label", has_text=choice).first.click()
    page.get_by_role("button", name="Commit, then see").click()
    deadline = time.monotonic() + 30
    while verdicts.count() == before:
        assert time.monotonic() < deadline, f"no verdict for {choice!r}"
        page.wait_for_timeout(50)
    return time.monotonic()


def _answers_shown(teacher) -> int:
    text = teacher.inner_text("[data-testid=stMainBlockContainer]")
    line = next(line for line in text.splitlines() if "answers." in line or "answer." in line)
    return int(line.split(";")[1].split()[0])


def _teacher_sees(teacher, n: int, since: float) -> float:
    """Seconds from `since` until the teacher's view counts `n` answers."""
    deadline = time.monotonic() + 60
    while _answers_shown(teacher) < n:
        assert time.monotonic() < deadline, f"the teacher's view never counted {n} answers"
        teacher.wait_for_timeout(100)
    return time.monotonic() - since


def test_a_teacher_and_three_students_behind_nginx_with_a_process_killed():
    with running_class(2) as url, chromium() as browser:
        teacher = browser.new_page(viewport={"width": 1280, "height": 1000})
        teacher.goto(page_url(url, "classroom"))
        wait_idle(teacher)
        teacher.get_by_role("tab", name="Teach a class").click()
        teacher.get_by_role("button", name="Open the class").click()
        teacher.wait_for_url("**teach=**", timeout=30_000)
        link = teacher.url
        code = link.split("teach=")[1].split("&")[0]
        wait_idle(teacher)
        key = _teacher_key(teacher)
        assert key not in teacher.url and "key=" not in teacher.url  # the address can be photographed

        students, names = [], ("Ada", "<b>Eve</b>", "Sam")
        for name in names:
            page = browser.new_page(viewport={"width": 800, "height": 900})  # its own browser: its own cookies
            page.goto(page_url(url, "classroom", join=code))
            wait_idle(page)
            page.get_by_label("A nickname (optional)").fill(name)
            page.get_by_role("button", name="Join").click()
            page.wait_for_selector(f"text=code {code}", timeout=30_000)
            page.goto(page_url(url, "lookup"))
            wait_idle(page)
            assert page.get_by_role("button", name="Show the rest of the page").count() == 0  # the teacher opens it
            students.append(page)
        lags = []
        for page, choice in zip(students, ("apple", "chair", "chair"), strict=True):
            lags.append(_teacher_sees(teacher, len(lags) + 1, _answer(page, choice)))
        assert max(lags) < SEEN_WITHIN_S, lags
        assert "<b>Eve</b>" in teacher.inner_text("[data-testid=stTable]")  # the nickname as text, not markup

        first = students[0]
        first.reload()  # F5: the same browser, a new session
        wait_idle(first)
        assert first.get_by_text("You said “apple”").count() == 1  # resumed: answered, on to question 2

        # The process the second student is on is killed: their answer was stored before it was acknowledged.
        backend = next(c["value"] for c in students[1].context.cookies() if c["name"] == "explorer_backend")
        pid = url.pids[url.backends.index(backend)]
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        second = students[1]
        second.reload()  # nginx sends the browser to the other process
        wait_idle(second, timeout=90_000)
        assert second.get_by_text("Right: chair wins").count() == 1
        since = _answer(second, "shrinks" if "grows" not in second.inner_text("body") else "grows")
        teacher.goto(link)  # the teacher's own process may have been the one killed: their link opens the view
        wait_idle(teacher, timeout=90_000)
        assert _teacher_sees(teacher, 4, since) < 60
        shown = teacher.inner_text("body")
        for name in names:
            assert name in shown
        _the_board_shows_the_question_and_no_key(browser, teacher, code, key)


def _teacher_key(teacher) -> str:
    """The teacher's key, as their browser keeps it: the cookie pages/_teacher.py writes ("CODE.key")."""
    deadline = time.monotonic() + 30
    while True:
        kept = [c["value"] for c in teacher.context.cookies() if c["name"] == "attention_explorer_teacher"]
        if kept and "." in kept[0]:
            return kept[0].split(".", 1)[1]
        assert time.monotonic() < deadline, "the teacher's browser kept no key"
        teacher.wait_for_timeout(100)


def _the_board_shows_the_question_and_no_key(browser, teacher, code: str, key: str) -> None:
    """The projector's view: opened from the teacher's view, it shows the code and, once the teacher picks it, the
    first question's bars; its address and its whole HTML hold no key."""
    with teacher.expect_popup() as opened:
        teacher.get_by_text("Open the board for the projector").click()
    board = opened.value
    board.set_viewport_size({"width": 1280, "height": 800})
    wait_idle(board, timeout=90_000)
    assert code in board.inner_text("body") and "not put a question" in board.inner_text("body")
    teacher.get_by_label("The board shows").click()  # Streamlit's select box: its options open below it
    teacher.get_by_role("option", name="question 1:").first.click()
    board.get_by_text("1. Lookup").first.wait_for(timeout=30_000)  # the board reads again every 2 s
    board.locator("[data-testid=stPlotlyChart] .main-svg").first.wait_for(timeout=30_000)
    assert key not in board.url and key not in board.content(), "the teacher's key is on the board"
    assert board.locator("[data-testid=stSidebar]").is_hidden()
