"""A classroom's data (attention.classroom) on SQLite and on a PostgreSQL server the test starts itself, and the
pages that read it in AppTest: progress that survives a new session, a class a teacher opens and reads, answers
that stay closed until answered. The class behind nginx, in Chromium, is tests/test_class_live.py."""

import csv
import io
import multiprocessing
import os
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import create_engine, inspect

from attention import classroom as cr
from attention.classroom.database import _engine as engines  # one per URL: cleared between tests
from tests.postgres import running_postgres


@pytest.fixture(scope="module")
def postgres_url():
    with running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path, monkeypatch):
    """A fresh database of each kind, as the operator's environment names it."""
    if request.param == "sqlite":
        monkeypatch.setenv("ATTENTION_EXPLORER_DATA", str(tmp_path))
        monkeypatch.delenv("ATTENTION_EXPLORER_DATABASE_URL", raising=False)
    else:
        url = request.getfixturevalue("postgres_url")
        engine = create_engine(url)
        with engine.begin() as c:  # a fresh schema for each test on the one server
            c.exec_driver_sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        engine.dispose()
        engines.cache_clear()
        monkeypatch.setenv("ATTENTION_EXPLORER_DATABASE_URL", url)
    yield request.param
    engines.cache_clear()


def test_the_migrations_build_exactly_the_schema_the_code_reads(store):
    """Alembic's upgrade to head gives the tables schema.py declares: autogenerate finds nothing to change."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from attention.classroom.schema import Base

    engine = cr.database()
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []
    assert {"learners", "answers", "seen", "skipped", "classes", "class_reveals", "join_attempts"} <= set(
        inspect(engine).get_table_names())
    if store == "sqlite":
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_progress_is_kept_against_the_browser_id_and_nothing_else(store):
    token, other = cr.new_token(), cr.new_token()
    cr.mark_seen(token, "lookup", step=True)
    cr.mark_seen(token, "home")
    cr.record_answer(token, "lookup.winner", "lookup", "cherry", reveal={"answer": "cherry", "why": "w"},
                     answer="cherry")
    cr.record_answer(token, "pred.paris", "predictions", " Paris")  # a model question, not judged yet
    cr.mark_skipped(token, "scaling")
    kept = cr.progress_of(token)
    assert kept.seen == {"lookup", "home"} and kept.last_step == "lookup" and kept.skipped == {"scaling"}
    assert kept.answers["lookup.winner"] == cr.StoredAnswer("cherry", {"answer": "cherry", "why": "w"})
    assert kept.answers["pred.paris"] == cr.StoredAnswer(" Paris", None)
    assert cr.progress_of(other) == cr.Progress()  # another browser reads nothing of it
    with cr.session() as s:  # the id itself is never stored, only its hash
        from attention.classroom.schema import Learner

        assert [row.token_hash for row in s.query(Learner)] == [cr.progress.hashed(token)]
    cr.forget_answer(token, "lookup.winner", "scaling")
    kept = cr.progress_of(token)
    assert "lookup.winner" not in kept.answers and kept.skipped == frozenset()
    cr.forget_learner(token)
    assert cr.progress_of(token) == cr.Progress()
    with cr.session() as s:  # its pages and answers went with it
        from attention.classroom.schema import Answer, Seen

        assert s.query(Seen).count() == 0 and s.query(Answer).count() == 0


def _answer_many(args) -> None:
    data, token, start = args
    os.environ["ATTENTION_EXPLORER_DATA"] = data
    for i in range(start, start + 40):
        cr.record_answer(token, f"q{i}", "lookup", "a")


def test_several_processes_write_to_one_sqlite_file_and_lose_nothing(tmp_path, monkeypatch):
    """`make class` runs several app processes on one SQLite file: four writing at once keep every answer."""
    monkeypatch.setenv("ATTENTION_EXPLORER_DATA", str(tmp_path))
    monkeypatch.delenv("ATTENTION_EXPLORER_DATABASE_URL", raising=False)
    engines.cache_clear()
    tokens = [cr.new_token() for _ in range(4)]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.map(_answer_many, [(str(tmp_path), t, 40 * i) for i, t in enumerate(tokens)])
    for i, token in enumerate(tokens):
        assert set(cr.progress_of(token).answers) == {f"q{j}" for j in range(40 * i, 40 * i + 40)}
    engines.cache_clear()


def test_a_class_is_read_only_with_its_teachers_secret(store):
    opened = cr.open_class("Year 12", ("lookup", "self_attention"))
    assert len(opened.code) == cr.classes.CODE_LENGTH and set(opened.code) <= set(cr.classes.CODE_ALPHABET)
    for wrong in ("", "x", opened.secret[:-1] + ("A" if opened.secret[-1] != "A" else "B")):
        with pytest.raises(cr.NotTeacher):
            cr.teacher_class(opened.code, wrong)
    with cr.session() as s:  # only the secret's hash is kept
        from attention.classroom.schema import Classroom

        assert opened.secret not in {row.secret_hash for row in s.query(Classroom)}
    teacher = cr.teacher_class(opened.code.lower(), opened.secret)
    assert teacher.route == ("lookup", "self_attention") and teacher.title == "Year 12"


def test_students_answers_reach_the_teacher_counted_as_they_were_given(store):
    opened = cr.open_class("Year 12", ("lookup",))
    choices = ("apple", "banana", "cherry")
    given = {}
    for i, choice in enumerate(("cherry", "cherry", "apple", "banana", "cherry")):
        token = cr.new_token()
        cr.join_class(token, f" {opened.code.lower()} ", f"s{i}", client="10.0.0.1")
        cr.record_answer(token, "lookup.winner", "lookup", choice, answer="cherry",
                         reveal={"answer": "cherry", "why": "the best match"})
        given[f"s{i}"] = choice
    outsider = cr.new_token()  # not in the class: never on the teacher's screen
    cr.record_answer(outsider, "lookup.winner", "lookup", "apple", answer="cherry", reveal={"answer": "cherry"})
    teacher = cr.teacher_class(opened.code, opened.secret)
    rows = cr.class_answers(teacher)
    assert {r.student: r.choice for r in rows} == given
    (summary,) = cr.summarize(rows, [("lookup.winner", "lookup", choices)])
    expected = Counter(given.values())
    assert summary.counts == tuple((c, expected[c]) for c in choices)
    assert summary.answered == 5 and summary.right == expected["cherry"] and summary.answer == "cherry"
    assert summary.share_right == pytest.approx(3 / 5)
    assert {c for c, _, _ in summary.wrong} == {"apple", "banana"}
    assert all(why == "the best match" for _, _, why in summary.wrong)
    students = {s.name: s for s in cr.class_students(teacher)}
    assert set(students) == set(given) and all(s.answered == 1 for s in students.values())
    assert sum(s.right for s in students.values()) == 3


def test_a_hostile_nickname_is_kept_as_short_text_and_the_csv_does_not_run_it(store):
    opened = cr.open_class("c", ("lookup",))
    token = cr.new_token()
    hostile = "=HYPERLINK(\"http://x\")<script>alert(1)</script>\x00\n" + "a" * 100
    cr.join_class(token, opened.code, hostile, client="10.0.0.2")
    cr.record_answer(token, "lookup.winner", "lookup", "apple")
    rows = cr.class_answers(cr.teacher_class(opened.code, opened.secret))
    name = rows[0].student
    assert len(name) == cr.NICKNAME_CHARS and "\x00" not in name and "\n" not in name
    assert name == " ".join("".join(c for c in hostile if c.isprintable()).split())[:cr.NICKNAME_CHARS]
    table = list(csv.reader(io.StringIO(cr.answers_csv(rows))))
    assert table[0] == list(cr.summary.CSV_COLUMNS)
    assert table[1][0] == "'" + name  # a formula to a spreadsheet, written as text


def test_join_codes_resist_guessing(store):
    opened = cr.open_class("c", ("lookup",))
    guesser = cr.new_token()
    with pytest.raises(cr.ClassError, match="6 letters"):  # a typo of another shape is not a guess: not counted
        cr.join_class(guesser, "ZZZ", None, client="203.0.113.9")
    for _ in range(cr.classes.BROWSER_TRIES):
        with pytest.raises(cr.ClassError, match="No open class"):
            cr.join_class(guesser, "ZZZZZZ", None, client="203.0.113.9")
    with pytest.raises(cr.ClassError, match="Too many"):  # even the right code, from that browser, for a while
        cr.join_class(guesser, opened.code, None, client="203.0.113.9")
    assert cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.9").code == opened.code  # a classmate
    for _ in range(cr.classes.ADDRESS_TRIES - cr.classes.BROWSER_TRIES):  # many browsers behind one address
        with pytest.raises(cr.ClassError, match="No open class"):
            cr.join_class(cr.new_token(), "ZZZZZZ", None, client="203.0.113.9")
    with pytest.raises(cr.ClassError, match="Too many"):
        cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.9")
    assert cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.10").code == opened.code
    with cr.session() as s:  # only failures are kept, an address salted (not sha256 of the address alone)
        from attention.classroom.schema import JoinAttempt

        kept = list(s.query(JoinAttempt))
        assert len(kept) == cr.classes.ADDRESS_TRIES and not any(a.ok for a in kept)
        assert cr.progress.hashed("203.0.113.9") not in {a.client for a in kept}
    cr.close_class(cr.teacher_class(opened.code, opened.secret))
    with pytest.raises(cr.ClassError, match="closed"):
        cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.11")


def test_a_teacher_lets_a_shut_out_browser_in_and_a_new_key_shuts_the_old_one_out(store):
    opened = cr.open_class("c", ("lookup",))
    typist = cr.new_token()
    for _ in range(cr.classes.BROWSER_TRIES):
        with pytest.raises(cr.ClassError, match="No open class"):
            cr.join_class(typist, "ZZZZZZ", None, client="203.0.113.20")
    with pytest.raises(cr.ClassError, match="Too many"):
        cr.join_class(typist, opened.code, None, client="203.0.113.20")
    teacher = cr.teacher_class(opened.code, opened.secret)
    assert cr.wrong_codes_lately() == cr.classes.BROWSER_TRIES
    assert cr.let_browsers_try_again(teacher) == cr.classes.BROWSER_TRIES and cr.wrong_codes_lately() == 0
    assert cr.join_class(typist, opened.code, None, client="203.0.113.20").code == opened.code
    new = cr.rotate_key(teacher)
    assert new != opened.secret and cr.teacher_class(opened.code, new).id == teacher.id
    with pytest.raises(cr.NotTeacher):
        cr.teacher_class(opened.code, opened.secret)
    cr.close_class(teacher)
    with pytest.raises(cr.ClassError, match="closed"):
        cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.21")
    cr.reopen_class(teacher)
    assert cr.join_class(cr.new_token(), opened.code, None, client="203.0.113.21").code == opened.code
    cr.show_question(teacher, "lookup.winner")  # the board reads it without a key
    assert cr.board_class(opened.code).shown_question == "lookup.winner"
    with pytest.raises(cr.ClassError):
        cr.board_class("ZZZZZZ")


def test_an_answer_given_after_its_page_was_opened_is_late_and_counted_apart(store):
    opened = cr.open_class("c", ("lookup",))
    teacher = cr.teacher_class(opened.code, opened.secret)
    early, late, alone = cr.new_token(), cr.new_token(), cr.new_token()
    for token in (early, late):
        cr.join_class(token, opened.code, None, client="10.0.0.5")
    reveal = {"answer": "chair", "why": "w"}
    cr.record_answer(early, "lookup.winner", "lookup", "apple", reveal=reveal, answer="chair")
    cr.set_reveal(teacher, "lookup", True)  # the teacher opens the page for the class: the answer on screen
    cr.record_answer(late, "lookup.winner", "lookup", "chair", reveal=reveal, answer="chair")
    cr.forget_answer(early, "lookup.winner")  # asked again after the reveal: still the first, in-time prediction
    cr.record_answer(early, "lookup.winner", "lookup", "chair", reveal=reveal, answer="chair")
    cr.mark_skipped(alone, "lookup")  # outside a class: "Show the rest of the page" before answering
    cr.record_answer(alone, "lookup.winner", "lookup", "chair", reveal=reveal, answer="chair")
    rows = cr.class_answers(teacher)
    assert sorted((r.choice, r.late) for r in rows) == [("apple", False), ("chair", True)]
    (summary,) = cr.summarize(rows, [("lookup.winner", "lookup", ("apple", "banana", "chair"))])
    assert (summary.answered, summary.share_right, summary.late, summary.late_right) == (1, 0.0, 1, 1)
    assert dict(summary.counts) == {"apple": 1, "banana": 0, "chair": 0} and dict(summary.late_counts)["chair"] == 1
    with cr.session() as s:  # outside a class too: the learner opened the page whole before answering
        from attention.classroom.schema import Answer, Learner

        learner = s.query(Learner).filter(Learner.token_hash == cr.progress.hashed(alone)).one()
        assert s.get(Answer, (learner.id, "lookup.winner")).late


def test_the_teacher_reads_each_students_first_prediction_not_a_second_try(store):
    opened = cr.open_class("c", ("lookup",))
    token = cr.new_token()
    cr.join_class(token, opened.code, "Ann", client="10.0.0.4")
    reveal = {"answer": "chair", "why": "w"}
    cr.record_answer(token, "lookup.winner", "lookup", "apple", reveal=reveal, answer="chair")
    cr.forget_answer(token, "lookup.winner", "lookup")  # "Ask me again", after seeing the answer
    assert "lookup.winner" not in cr.progress_of(token).answers  # asked again: the learner's page asks anew
    cr.record_answer(token, "lookup.winner", "lookup", "chair", reveal=reveal, answer="chair")
    assert cr.progress_of(token).answers["lookup.winner"].choice == "chair"
    teacher = cr.teacher_class(opened.code, opened.secret)
    (row,) = cr.class_answers(teacher)
    assert (row.choice, row.right, row.attempts, row.last_choice) == ("apple", False, 2, "chair")
    (summary,) = cr.summarize([row], [("lookup.winner", "lookup", ("apple", "banana", "chair"))])
    assert summary.right == 0 and dict(summary.counts)["apple"] == 1
    table = list(csv.DictReader(io.StringIO(cr.answers_csv([row]))))
    assert table[0]["first_prediction"] == "apple" and table[0]["choice_now"] == "chair" and table[0]["attempts"] == "2"


def test_a_class_and_its_answers_are_deleted_on_request_and_after_the_retention(store, monkeypatch):
    kept, gone = cr.open_class("kept", ("lookup",)), cr.open_class("gone", ("lookup",))
    tokens = {}
    for opened in (kept, gone):
        tokens[opened.code] = cr.new_token()
        cr.join_class(tokens[opened.code], opened.code, "x", client="10.0.0.3")
        cr.record_answer(tokens[opened.code], "lookup.winner", "lookup", "apple")
    cr.delete_class(cr.teacher_class(gone.code, gone.secret))
    with pytest.raises(cr.NotTeacher):
        cr.teacher_class(gone.code, gone.secret)
    assert cr.progress_of(tokens[gone.code]) == cr.Progress()
    assert cr.progress_of(tokens[kept.code]).answers
    alone = cr.new_token()
    cr.mark_seen(alone, "lookup")
    assert cr.purge() == 0 and cr.progress_of(alone).seen  # nothing is past the retention yet
    later = cr.progress.now() + cr.retention() + timedelta(minutes=1)
    assert cr.purge(later) == 1
    assert cr.progress_of(tokens[kept.code]) == cr.Progress() and cr.progress_of(alone) == cr.Progress()
    monkeypatch.setenv("ATTENTION_EXPLORER_RETENTION_DAYS", "2")
    assert cr.retention() == timedelta(days=2)


# --- The pages, in AppTest -------------------------------------------------------------------------------------
def _browser(token: str, path: str = "pages/home.py", **params):
    """A new session (a reload, a new tab) of the browser whose cookie holds `token`, opened at `path`."""
    from streamlit.testing.v1 import AppTest

    from tests.test_pages import APP

    at = AppTest.from_file(str(APP), default_timeout=60)
    at.session_state["learner.token"] = token
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    if path != "pages/home.py":
        at.switch_page(path).run()
    assert not at.exception, at.exception
    return at


def _drawn(at) -> list:
    """The page's charts and live components (not the frame's: the id's cookie, the chart-code prefetch, the
    screen's fit)."""
    return at.get("plotly_chart") + [c for c in at.get("bidi_component")
                                     if c.key not in ("learner.cookie", "prefetch", "fit")]


def test_a_reload_resumes_where_the_learner_was():
    from attention.toy.questions import questions_for
    from tests.test_lessons import _commit

    token = cr.new_token()
    at = _browser(token, "pages/lookup.py")
    q = questions_for("lookup")[0]
    _commit(at, q.key, q.reveal().answer)
    again = _browser(token, "pages/lookup.py")  # F5: a new session of the same browser
    said = " ".join(m.value for m in again.success).replace("\\", "")
    assert f"Right: {q.reveal().said}." in said
    assert "Question 2 of 2" in " ".join(m.value for m in again.markdown)  # on to the next question
    home = _browser(token)
    text = " ".join(m.value for m in home.markdown).replace("\\", "")
    assert "**1** question answered, **1** right" in text and "So far: **1 of 11** pages opened" in text
    assert [b for b in home.button if b.label.startswith("Continue: Step by step")]


def test_an_address_with_a_pages_settings_opens_nothing_before_the_answer():
    at = _browser(cr.new_token(), "pages/lookup.py", **{"lookup.sweetness": "0.5", "lookup.scaled": "false"})
    assert [b for b in at.button if b.key == "lesson.skip"]  # the rest waits
    assert not _drawn(at)


def test_a_class_on_the_pages_teacher_and_students(monkeypatch):
    """A teacher opens a class on the page; a student joins with the code and a hostile nickname and answers; the
    teacher's view counts the answer and shows the nickname as text; without the key it shows nothing; in the
    class the rest of a page opens only when the teacher reveals it."""
    from attention.toy.questions import questions_for
    from tests.test_lessons import _commit

    teacher = _browser(cr.new_token(), "pages/classroom.py")
    teacher.radio(key="classroom.route").set_value("toy-45")
    teacher.button(key="classroom.open").click().run()
    assert not teacher.exception, teacher.exception
    assert "key" not in teacher.query_params  # the key is off the address (a photo of the screen gives nothing)
    code, secret = teacher.session_state["classroom.teacher"]
    assert teacher.query_params["teach"] in (code, [code])
    assert f"code **{code}**" in " ".join(m.value for m in teacher.markdown)

    token = cr.new_token()
    student = _browser(token, "pages/classroom.py", join=code)
    student.text_input[1].set_value("<b>*Eve*</b>")
    student.button(key="FormSubmitter:classroom.join-Join").click().run()
    assert f"code {code}" in " ".join(m.value for m in student.success)
    lookup = _browser(token, "pages/lookup.py")
    assert not [b for b in lookup.button if b.key == "lesson.skip"]  # in a class: the teacher opens a page
    q = questions_for("lookup")[0]
    wrong = next(c for c in q.choices if c != q.reveal().answer)
    _commit(lookup, q.key, wrong)

    view = _browser(cr.new_token(), "pages/classroom.py", teach=code, key=secret)  # an old teacher's link
    assert "key" not in view.query_params and view.session_state["classroom.teacher"] == (code, secret)
    (table,) = view.table
    assert table.value["student"].tolist() == ["<b>*Eve*</b>"]  # a table cell: text, never markup
    shown = " ".join(c.value for c in view.caption).replace("\\", "")
    assert "1 answered; 0% right" in shown and f"1 chose “{wrong}”" in shown
    view.toggle(key="classroom.reveal.lookup").set_value(True).run()
    assert not [b for b in _browser(token, "pages/lookup.py").button if b.key == "lesson.skip"]
    opened = _browser(token, "pages/lookup.py")
    assert _drawn(opened)  # revealed: the whole page

    late = cr.new_token()  # a student who answers only after the page was opened for the class: counted apart
    joined = _browser(late, "pages/classroom.py", join=code)
    joined.button(key="FormSubmitter:classroom.join-Join").click().run()
    _commit(_browser(late, "pages/lookup.py"), q.key, q.reveal().answer)
    view.run()
    shown = " ".join(c.value for c in view.caption).replace("\\", "")
    assert "1 answered; 0% right" in shown and "1 more answered after the page was opened" in shown
    rows = cr.class_answers(cr.teacher_class(code, secret))
    assert sorted((r.student, r.late) for r in rows) == [("<b>*Eve*</b>", False), ("student 2", True)]
    csv_rows = cr.answers_csv(rows).splitlines()
    assert csv_rows[0].endswith(",after_page_opened") and sorted(r.rsplit(",", 1)[1] for r in csv_rows[1:]) == [
        "no", "yes"]

    refused = _browser(cr.new_token(), "pages/classroom.py", teach=code, key=secret[:-2])
    assert refused.error and not refused.table

    cr.delete_class(cr.teacher_class(code, secret))  # a student in the class is told once, on their next run
    opened.run()
    assert any("was deleted by its teacher" in t.value for t in opened.toast)
    opened.run()
    assert not any("was deleted" in t.value for t in opened.toast)
    told = [_browser(late) for _ in range(2)]  # the other student, on their next visits (new sessions): once
    assert [any("was deleted by its teacher" in t.value for t in at.toast) for at in told] == [True, False]


def test_each_route_states_measured_minutes_and_the_short_ones_fit_their_hour():
    """Every page a route holds was measured (benchmarks/lesson_minutes.py, in make bench); a "45 minutes"
    route's pages add up to 45 or less; Home's and each page's "about N min" are those figures."""
    from pages._site import SECTIONS

    measured = cr.routes.measured()["pages"]
    for key, route in cr.ROUTES.items():
        assert all(measured[p]["minutes"] >= 1 for p in route.pages), key
        assert route.minutes == sum(measured[p]["minutes"] for p in route.pages)
        if "45" in route.title:
            assert route.minutes <= 45, (key, route.minutes)
    for entries in SECTIONS.values():
        for e in entries:
            name = e.path.split("/")[-1].removesuffix(".py")
            assert e.minutes == measured.get(name, {}).get("minutes", 0)


def test_the_handout_holds_the_lessons_questions_and_only_its_teacher_gets_the_key():
    from attention.answer_key import answer_key

    opened = cr.open_class("c", cr.ROUTES["toy-45"].pages)
    key = answer_key(cr.ROUTES["toy-45"].pages)
    teacher = _browser(cr.new_token(), "pages/handout.py", teach=opened.code, key=opened.secret)
    shown = " ".join(m.value for m in teacher.markdown).replace("\\", "")
    for entry in key:
        assert entry.ask in shown and f"Answer:** {entry.answer}" in shown, entry.key
    student = _browser(cr.new_token(), "pages/handout.py")
    student.selectbox(key="handout.route").set_value("toy-45").run()
    shown = " ".join(m.value for m in student.markdown).replace("\\", "")
    assert all(entry.ask in shown for entry in key) and "Answer:" not in shown
    assert not any(belief in shown for entry in key for _, belief in entry.misconceptions)
