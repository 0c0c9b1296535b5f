"""`make soak`'s class: one teacher and CLASS_STUDENTS students in Chromium walking a class's route behind nginx,
one app process killed midway; what the class costs the server, how long students and the teacher wait, and
whether every answer a student saw taken is kept.

    python -m benchmarks.class_soak                        # 8 students, 2 app processes, route toy-45
    CLASS_ROUTE=real-45 CLASS_LAPS=4 CLASS_MINUTES=4 python -m benchmarks.class_soak   # as make soak runs it

The environment sets the class:
    CLASS_STUDENTS   browsers walking at once (default 8), each its own context (its own cookies: nginx's sticky
                     cookie and the learner's id)
    CLASS_PROCESSES  app processes behind nginx (default 2; serving.running_class, as `make class` serves a class)
    CLASS_ROUTE      the route the teacher picks (default toy-45; attention.classroom.ROUTES)
    CLASS_LAPS       times each browser walks the route, each time as a new student with a new nickname (default 1)
    CLASS_MINUTES    the walk's limit (default 6): no action starts after it; a walk under way is cut short there
    CLASS_THINK      a student's think time before each action, seconds "low-high" (default 2-5, uniform)
    CLASS_SEED       the students' choices and think times (default 33)

The teacher opens the class on the page (its route picked on the form) and stays on its view, which reads the class
again every 2 s. Each student opens the join link, types a unique nickname, joins, follows "Start" and then walks the
route: every question answered with a random choice ("Commit, then see"), then "Next". Before the class, each app
process opens the route's pages once (imports, models and caches loaded, as a server started before the lesson has;
the CPU this takes is reported apart), and the teacher's view runs alone for TEACHER_ALONE_S.

Measured:
- ack: a commit's click -> the question's "Ask me again" shown (the answer judged and drawn for the student); a
  click the page did not take (idle, the question still open, as after a failover) is clicked again, the time
  running from the first click, and counted (commits_clicked_again);
- teacher lag: an answer's ack -> the teacher's table counts it (its student's "answered" column; read every 100 ms;
  0 where the table counted it before the student's page showed it);
- page open: the click on "Start"/"Next" (or the join link's load) -> the new page's run ended and the app idle;
- CPU: user + system seconds of each app process over the walk (psutil, read every second and just before the
  kill; a revived process counted from when it answers, its start-up reported apart), of the harness (Chromium,
  Playwright's driver, this process) and of the whole machine;
- the fault: once half the expected answers are acknowledged (or half of CLASS_MINUTES has passed), the app process
  serving the most students is killed (SIGKILL) and started again REVIVE_EVERY_SECONDS later (url.revive(), as
  `attention-explorer class` does); after the walk every acknowledged answer must be in the database
  (attention.classroom.class_answers, by nickname and question): lost answers must be 0.

Students per core, the rule: a student's demand is the app processes' CPU over the walk, less the teacher's view
alone (its CPU a minute with no student, times the walk's minutes), divided by the student-minutes walked; students
per core = UTILISATION (0.5) x 60 s / that demand: the students whose demand fills half a core. The pace walked is
slowed by the harness itself (Chromium shares the machine), so the same CPU is also given per action (a page loaded
by the join link, a join, Start or Next, a commit, a "Show it here") and reckoned at think pace: one action every
mean think time (3.5 s), the page's own wait counted as nothing, the heaviest this think time can make a student (the
whole class clicking at once). A class of CLASS_SIZE needs (the teacher's view + CLASS_SIZE x the think-pace demand) /
(UTILISATION x 60 s) cores, rounded up. Beside them, the CPU per walk spread over the route's lesson minutes
(ROUTES[...].minutes, measured reading time): CPU alone, for a class that reads as it goes.

The figures go to benchmarks/class_soak.json under the route's name (a run replaces its route's entry).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from attention.classroom import ROUTES, class_answers, teacher_class
from attention.focus import from_visible_spaces
from benchmarks.browser import PAGE_ERRORS, percentile
from benchmarks.soak import WATCH_CONNECTION, Runs
from serving import REVIVE_EVERY_SECONDS, running_class
from tests.harness import CHROMIUM, CHROMIUM_ARGS, DONE, page_url

RESULT = Path(__file__).with_name("class_soak.json")
UTILISATION = 0.5  # the share of a core a class may fill: room for bursts, the browser's own work, a reload
TEACHER_ALONE_S = 30  # the teacher's view alone before students join: its own CPU
ACK_TIMEOUT_S = 90  # a commit with no "Ask me again" after this: unacknowledged (the student goes on)
UNTAKEN_S = 1.0  # a click whose question is still open this long after a run ended (or a reconnect): not taken
CLICKS = 3  # clicks on a commit before it counts as not taken
OPEN_TIMEOUT_S = 120  # a page that is not idle after this: an error (the student tries again)
FAILOVER_S = 30  # actions this long after the kill count as the failover's, apart from the steady figures
CLASS_SIZE = 40  # the class the summary sizes a server for
OTHER_CORES = 0.1  # work of other programs on the machine above which the report says the run was disturbed
QUIET_CPU_S = 0.1  # CPU seconds in 2 s under which an app process counts as idle (quiet())

# The page as a student sees it: which page, its open question (the key of its container), what else it offers.
STATE = """() => {
  const shown = e => e && e.offsetParent !== null;
  const buttons = [...document.querySelectorAll('button')].filter(shown);
  const commit = buttons.find(b => b.innerText.includes('Commit, then see'));
  let question = null;
  for (let e = commit; e && !question; e = e.parentElement) {
    question = [...e.classList].find(c => c.startsWith('st-key-lesson-') && !c.startsWith('st-key-lesson-choice-'))
      || null;
  }
  return {path: location.pathname.split('/').pop(), question: question && question.slice('st-key-'.length),
          showHere: buttons.some(b => b.innerText.includes('Show it here, then ask')),
          next: shown(document.querySelector('.st-key-path-next button')),
          lost: !!document.querySelector("[data-testid='stConnectionStatus']"),
          idle: !!document.querySelector("DONE")};
}""".replace('"DONE"', json.dumps(DONE))
# A question after its commit: acknowledged ("Ask me again" in its container), or open still (its Commit button shown,
# the app idle, no connection status), and the reconnects the page has shown (window.__lost, WATCH_CONNECTION).
ACKED = """k => { const c = document.querySelector('.st-key-' + k);
  const has = t => !!c && [...c.querySelectorAll('button')].some(b => b.innerText.includes(t));
  return {acked: has('Ask me again'), lost: window.__lost || 0,
          open: has('Commit, then see') && !document.querySelector("[data-testid='stConnectionStatus']")
                && !!document.querySelector("DONE")}; }""".replace('"DONE"', json.dumps(DONE))
OPENED = """t => ({there: location.pathname.split('/').pop() === t, idle: !!document.querySelector("DONE"),
  lost: window.__lost || 0, reconnecting: !!document.querySelector("[data-testid='stConnectionStatus']")})"""
OPENED = OPENED.replace('"DONE"', json.dumps(DONE))
# The teacher's view: each student's answers, as its table counts them (nickname -> answered).
TEACHER_TABLE = """() => {
  const out = {};
  for (const row of document.querySelectorAll("[data-testid='stTable'] tbody tr")) {
    const cells = [...row.querySelectorAll('th, td')].map(c => c.innerText.trim());
    if (cells.length >= 3) out[cells[0]] = parseInt(cells[2], 10) || 0;
  }
  return out;
}"""


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass
class Commit:
    question: str  # the question's container key ("lesson-self-thinking")
    choice: str  # the label clicked, as the radio shows it
    at: float  # the click, seconds since the walk began
    seconds: float | None  # click -> "Ask me again"; None when it never came
    acked_at: float | None = None  # seconds since the walk began
    outcome: str = ""  # "acked"; "not taken" (CLICKS clicks, none taken); "timeout" (ACK_TIMEOUT_S)
    clicks: int = 0  # clicks on "Commit, then see" (more than 1: the page did not take one, answer())
    not_taken: list[str] = field(default_factory=list)  # when a click was seen not taken, and why


@dataclass
class Opened:
    page: str
    at: float
    seconds: float | None  # the click (or goto) -> the page idle; None when it did not come
    how: str  # "link" (the join link loaded), "start", "next"
    outcome: str = "opened"  # or "not taken", "reconnected" (NotTaken: clicked again), "timeout"


@dataclass
class Walk:
    """One student's walk: a browser's lap of the route under its own nickname."""

    name: str
    slot: int
    started: float = 0.0
    ended: float = 0.0
    join_s: float | None = None
    finished: bool = False  # reached the route's end with every question answered
    commits: list[Commit] = field(default_factory=list)
    opens: list[Opened] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    backend: str = ""  # the app process its cookie named when it joined
    shows: int = 0  # "Show it here, then ask" clicks (a model question about another model than the page's)


def summary(xs) -> dict | None:
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"n": len(xs), "median": statistics.median(xs), "p90": percentile(xs, 0.9), "min": min(xs), "max": max(xs)}


def cpu_seconds(pid: int) -> float | None:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return t.user + t.system


class Meter:
    """CPU seconds of processes that come and go: each pid's last reading, less its reading when counting began."""

    def __init__(self):
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}

    def read(self, pids) -> None:
        for pid in pids:
            now = cpu_seconds(pid)
            if now is None:
                continue
            self.base.setdefault(pid, now)
            self.last[pid] = now

    def used(self, pids=None) -> float:
        return sum(self.last[p] - self.base[p] for p in (self.last if pids is None else pids) if p in self.last)


def machine_busy() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class Class:
    """The run's shared state: the server, the clock, what every walk and the teacher's view saw."""

    def __init__(self, url, route: str, students: int, laps: int, minutes: float, think: tuple[float, float],
                 seed: int):
        self.url, self.route, self.pages = url, route, ROUTES[route].pages
        self.students, self.laps, self.minutes, self.think, self.seed = students, laps, minutes, think, seed
        self.start = time.monotonic()
        self.until = self.start + minutes * 60
        self.walks: list[Walk] = []
        self.live: dict[str, object] = {}  # nickname -> its browser context, while it walks
        self.seen: dict[tuple[str, int], float] = {}  # (nickname, its n-th answer) -> when the teacher counted it
        self.questions = 2 * len(self.pages)  # until the teacher's view says how many
        self.killed_at: float | None = None
        self.walks_ended = 0.0  # seconds since the walk began, once every walk has ended
        self.teacher_backend = ""  # the app process the teacher's cookie names
        self.kill: dict = {}
        self.teacher_reload = asyncio.Event()
        self.walking = True
        self.app = Meter()
        self.harness = Meter()

    def clock(self) -> float:
        return time.monotonic() - self.start

    def acked(self) -> int:
        return sum(c.seconds is not None for w in self.walks for c in w.commits)

    def harness_pids(self) -> list[int]:
        """Chromium, Playwright's driver and this process: every descendant but the app processes and nginx."""
        me = psutil.Process()
        apps = set(self.url.pids)
        found = [me.pid]
        for child in me.children(recursive=True):
            try:
                if child.pid not in apps and child.name() != "nginx" and child.ppid() not in apps:
                    found.append(child.pid)
            except psutil.Error:
                continue
        return found


async def think(c: Class, rng: random.Random) -> None:
    await asyncio.sleep(rng.uniform(*c.think))


class NotTaken(Exception):
    """A click the page did not take: a run ended since (or a reconnect showed), the app idle, and the page the same."""


async def open_page(page, runs: Runs, target: str, click) -> float:
    """Click `click` (a locator) and wait until `target` has run to its end and the app is idle; the seconds it
    took. NotTaken where the page stayed where it was for UNTAKEN_S after a run ended or a reconnect."""
    lost, before, t0 = await page.evaluate("() => window.__lost || 0"), runs.ended, time.monotonic()
    await click.click(timeout=OPEN_TIMEOUT_S * 1000)
    untaken_since = None
    while time.monotonic() - t0 < OPEN_TIMEOUT_S:
        try:
            s = await page.evaluate(OPENED, target)
        except Exception:  # noqa: BLE001 - the page redrawing
            s = {"there": False, "idle": False, "lost": lost, "reconnecting": True}
        if s["there"] and s["idle"] and runs.ended > before:
            return time.monotonic() - t0
        if not s["there"] and s["idle"] and not s["reconnecting"] and (runs.ended > before or s["lost"] > lost):
            untaken_since = untaken_since or time.monotonic()
            if time.monotonic() - untaken_since > UNTAKEN_S:
                raise NotTaken("reconnected" if s["lost"] > lost else "not taken")
        else:
            untaken_since = None
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{target} not idle in {OPEN_TIMEOUT_S} s")


async def answer(c: Class, w: Walk, page, runs: Runs, question: str, rng: random.Random) -> None:
    """Pick a random choice for the open question and commit it; the time from the click to its acknowledgment. A
    click the page did not take (the question still open and the app idle UNTAKEN_S after a run ended, or after a
    reconnect showed) is clicked again, as a student would, up to CLICKS times: the time runs from the first click."""
    scope = page.locator(f".st-key-{question}")
    labels = scope.locator("[data-testid='stRadio'] [role='radiogroup'] label")
    n = await labels.count()
    if not n:  # the question is being drawn again: the walk looks once more
        await asyncio.sleep(0.2)
        return
    pick = labels.nth(rng.randrange(n))
    choice = (await pick.inner_text()).strip()
    await pick.click()
    at = c.clock()
    commit = Commit(question, choice, at, None)
    w.commits.append(commit)
    lost = before = 0

    async def click() -> None:
        nonlocal lost, before
        lost, before = await page.evaluate("() => window.__lost || 0"), runs.ended
        commit.clicks += 1
        try:
            await scope.get_by_role("button", name="Commit, then see").click(timeout=5000)
        except Exception:  # noqa: BLE001 - gone meanwhile: the verdict is coming
            pass

    await click()
    untaken_since = None
    while c.clock() - at < ACK_TIMEOUT_S:
        try:
            s = await page.evaluate(ACKED, question)
        except Exception:  # noqa: BLE001 - the page redrawing
            s = {"acked": False, "open": False, "lost": lost}
        if s["acked"]:
            commit.acked_at, commit.outcome = c.clock(), "acked"
            commit.seconds = commit.acked_at - at
            return
        if s["open"] and (runs.ended > before or s["lost"] > lost):
            untaken_since = untaken_since or time.monotonic()
            if time.monotonic() - untaken_since > UNTAKEN_S:
                why = "after a reconnect" if s["lost"] > lost else "a run ended, the question still open"
                commit.not_taken.append(f"{c.clock():.1f} s: {why}")
                if commit.clicks >= CLICKS:
                    break
                await click()
                untaken_since = None
        else:
            untaken_since = None
        await asyncio.sleep(0.05)
    commit.outcome = "timeout" if commit.clicks < CLICKS else "not taken"
    w.errors.append(f"{c.clock():.1f} s: no acknowledgment for {question} after {commit.clicks} clicks "
                    f"({commit.outcome})")


async def walk(c: Class, browser, slot: int, lap: int, code: str) -> Walk:
    """A student's walk: join with a unique nickname, follow Start, answer every question, Next to the route's end."""
    w = Walk(name=f"kid{slot + 1:02d}-{lap + 1}", slot=slot)
    c.walks.append(w)
    rng = random.Random(c.seed * 10_000 + slot * 100 + lap)
    context = await browser.new_context(viewport={"width": 1000, "height": 900})
    page = await context.new_page()
    runs = Runs(page)
    w.started = c.clock()
    c.live[w.name] = context
    try:
        t0 = time.monotonic()
        await page.goto(page_url(c.url, "classroom", join=code), timeout=OPEN_TIMEOUT_S * 1000)
        await page.wait_for_selector(DONE, timeout=OPEN_TIMEOUT_S * 1000)
        w.opens.append(Opened("classroom", w.started, time.monotonic() - t0, "link"))
        await page.evaluate(WATCH_CONNECTION)  # counts the reconnects the page shows (window.__lost)
        await think(c, rng)
        await page.get_by_label("A nickname (optional)").fill(w.name)
        t0 = time.monotonic()
        await page.get_by_role("button", name="Join").click()
        await page.get_by_text(f"code {code}").first.wait_for(timeout=OPEN_TIMEOUT_S * 1000)
        w.join_s = time.monotonic() - t0
        w.backend = next((k["value"] for k in await context.cookies() if k["name"] == "explorer_backend"), "")
        await think(c, rng)
        for _ in range(3):  # a click not taken is clicked again
            at = c.clock()
            try:
                w.opens.append(Opened(c.pages[0], at, await open_page(page, runs, c.pages[0],
                                                                      page.get_by_text("Start:").first), "start"))
                break
            except NotTaken as e:
                w.opens.append(Opened(c.pages[0], at, None, "start", str(e)))
        await steps(c, w, page, runs, rng)
    except Exception as e:  # noqa: BLE001 - a walk that broke: said, and the class goes on
        w.errors.append(f"{c.clock():.1f} s: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    finally:
        w.ended = c.clock()
        c.live.pop(w.name, None)
        try:
            w.errors += [f"{w.ended:.1f} s: the page showed {e}" for e in await page.evaluate(PAGE_ERRORS)]
        except Exception:  # noqa: BLE001
            pass
        await context.close()
    return w


async def steps(c: Class, w: Walk, page, runs: Runs, rng: random.Random) -> None:
    """From the route's first page to its end, by what the page shows: an open question, a model question's
    "Show it here", Next."""
    stuck_since = None
    while time.monotonic() < c.until:
        s = await page.evaluate(STATE)
        if s["lost"] or not s["idle"]:  # running, or reconnecting after the kill
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since > OPEN_TIMEOUT_S:
                w.errors.append(f"{c.clock():.1f} s: {s['path']} not idle for {OPEN_TIMEOUT_S} s: reloaded")
                await page.reload(timeout=OPEN_TIMEOUT_S * 1000)
                await page.wait_for_selector(DONE, timeout=OPEN_TIMEOUT_S * 1000)
                await page.evaluate(WATCH_CONNECTION)
                stuck_since = None
            await asyncio.sleep(0.2)
            continue
        stuck_since = None
        if s["question"]:
            await think(c, rng)
            await answer(c, w, page, runs, s["question"], rng)
        elif s["showHere"]:
            await think(c, rng)
            before, t0 = runs.ended, time.monotonic()
            w.shows += 1
            await page.get_by_role("button", name="Show it here, then ask").first.click()
            while runs.ended == before and time.monotonic() - t0 < OPEN_TIMEOUT_S:
                await asyncio.sleep(0.05)
        elif s["path"] == c.pages[-1]:
            w.finished = True
            return
        elif s["next"] and s["path"] in c.pages:
            target = c.pages[c.pages.index(s["path"]) + 1]
            await think(c, rng)
            at = c.clock()
            seconds, outcome = None, "opened"
            try:
                seconds = await open_page(page, runs, target, page.locator(".st-key-path-next button"))
            except NotTaken as e:  # the student clicks again: the loop finds Next there still
                outcome = str(e)
                w.errors.append(f"{c.clock():.1f} s: Next to {target} was not taken ({e}): clicked again")
            except Exception as e:  # noqa: BLE001 - counted; the loop looks at the page again
                outcome = "timeout"
                w.errors.append(f"{c.clock():.1f} s: Next to {target}: {type(e).__name__}")
            w.opens.append(Opened(target, at, seconds, "next", outcome))
        else:
            w.errors.append(f"{c.clock():.1f} s: stuck on {s['path']} (no question, no Next)")
            return


async def browser_slot(c: Class, browser, slot: int, code: str) -> None:
    for lap in range(c.laps):
        if time.monotonic() >= c.until:
            return
        await walk(c, browser, slot, lap, code)


async def watch_teacher(c: Class, teacher, link: str) -> None:
    """Read the teacher's table every 100 ms: when each student's n-th answer is first counted."""
    counted: dict[str, int] = {}
    while c.walking or any(counted.get(w.name, 0) < sum(k.seconds is not None for k in w.commits)
                           for w in c.walks):
        if c.teacher_reload.is_set():  # the teacher's process was the one killed: their link opens the view
            c.teacher_reload.clear()
            try:
                await teacher.goto(link, timeout=OPEN_TIMEOUT_S * 1000)
                await teacher.wait_for_selector(DONE, timeout=OPEN_TIMEOUT_S * 1000)
            except Exception as e:  # noqa: BLE001
                c.kill["teacher_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        try:
            table = await teacher.evaluate(TEACHER_TABLE)
        except Exception:  # noqa: BLE001 - the view redrawing, or reloading
            table = {}
        now = c.clock()
        for name, n in table.items():
            for k in range(counted.get(name, 0) + 1, n + 1):
                c.seen.setdefault((name, k), now)
            counted[name] = max(counted.get(name, 0), n)
        if not c.walking and c.clock() > c.walks_ended + 60:  # the teacher never counted some: they show as missing
            return
        await asyncio.sleep(0.1)


async def sample(c: Class) -> None:
    while c.walking:
        c.app.read(p for p in c.url.pids if p in c.app.base)  # a revived process once fault() has counted it
        c.harness.read(c.harness_pids())
        await asyncio.sleep(1)


async def fault(c: Class) -> None:
    """Midway, kill the app process serving the most students; start it again as `attention-explorer class` does."""
    expected = c.students * c.laps * c.questions
    while c.walking and c.acked() < expected / 2 and time.monotonic() < c.start + c.minutes * 30:
        await asyncio.sleep(0.2)
    if not c.walking:
        return
    owners = {}
    for name, context in list(c.live.items()):
        try:
            owners[name] = next((k["value"] for k in await context.cookies() if k["name"] == "explorer_backend"), "")
        except Exception:  # noqa: BLE001 - the walk just ended
            continue
    counts = {b: sum(o == b for o in owners.values()) for b in c.url.backends}
    victim = max(c.url.backends, key=lambda b: counts[b])
    i = c.url.backends.index(victim)
    pid = c.url.pids[i]
    c.app.read([pid])
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    c.killed_at = c.clock()
    if c.teacher_backend == victim:
        c.teacher_reload.set()
    c.kill.update(at_s=c.killed_at, victim=victim, students_on_it=counts[victim], students_walking=len(owners),
                  acked_before=c.acked(), teacher_on_it=c.teacher_backend == victim)
    await asyncio.sleep(REVIVE_EVERY_SECONDS)
    t0 = time.monotonic()
    revived = await asyncio.to_thread(c.url.revive)
    new = c.url.pids[i]
    c.kill.update(revived=revived, revive_s=time.monotonic() - t0, restart_cpu_s=cpu_seconds(new))
    c.app.read([new])  # counted from here: its start-up is the restart's, reported apart


async def warm(c: Class, browser) -> dict:
    """Each app process opens the route's pages once, directly (not through nginx): what it loads before a lesson."""
    before = {pid: cpu_seconds(pid) for pid in c.url.pids}
    t0 = time.monotonic()
    for backend in c.url.backends:
        context = await browser.new_context(viewport={"width": 1000, "height": 900})
        page = await context.new_page()
        for name in c.pages:
            await page.goto(page_url(f"http://{backend}", name), timeout=300_000)
            await page.wait_for_selector(DONE, timeout=300_000)
            await page.wait_for_timeout(500)
            await page.wait_for_selector(DONE, timeout=300_000)
        await context.close()
    return {"seconds": time.monotonic() - t0,
            "cpu_s": [cpu_seconds(pid) - before[pid] for pid in c.url.pids]}


async def quiet(pids: list[int], most_s: float = 60) -> None:
    """Wait until every app process is idle (under QUIET_CPU_S in 2 s: the model side's import that a process's first
    page starts in the background, serving.warm_model_side, done), at most `most_s`."""
    deadline = time.monotonic() + most_s
    while time.monotonic() < deadline:
        before = [cpu_seconds(p) or 0.0 for p in pids]
        await asyncio.sleep(2)
        if all((cpu_seconds(p) or 0.0) - b < QUIET_CPU_S for p, b in zip(pids, before, strict=True)):
            return


async def open_class(c: Class, browser) -> tuple[object, str, str]:
    """The teacher opens the class with the route on the page; their page, the class's code and the teacher's link."""
    context = await browser.new_context(viewport={"width": 1280, "height": 1000})
    teacher = await context.new_page()
    await teacher.goto(page_url(c.url, "classroom"), timeout=OPEN_TIMEOUT_S * 1000)
    await teacher.wait_for_selector(DONE, timeout=OPEN_TIMEOUT_S * 1000)
    await teacher.locator("[data-testid='stRadio'] [role='radiogroup'] label", has_text=ROUTES[c.route].title).click()
    await teacher.get_by_role("button", name="Open the class").click()
    await teacher.wait_for_url("**teach=**", timeout=OPEN_TIMEOUT_S * 1000)
    await teacher.wait_for_selector(DONE, timeout=OPEN_TIMEOUT_S * 1000)
    link = teacher.url
    code = link.split("teach=")[1].split("&")[0]
    await teacher.get_by_text("answers.").first.wait_for(timeout=OPEN_TIMEOUT_S * 1000)
    text = await teacher.inner_text("[data-testid='stMainBlockContainer']")
    asked = len(re.findall(r"^\d+\. .+ · ", text, flags=re.M))
    c.questions = asked or c.questions
    c.teacher_backend = next((k["value"] for k in await context.cookies() if k["name"] == "explorer_backend"), "")
    return teacher, code, link


async def run_class(students: int, processes: int, route: str, laps: int, minutes: float,
                    think_s: tuple[float, float], seed: int) -> dict:
    from playwright.async_api import async_playwright

    with running_class(processes) as url:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            c = Class(url, route, students, laps, minutes, think_s, seed)
            warmed = await warm(c, browser)
            await quiet(url.pids)
            teacher, code, link = await open_class(c, browser)
            secret = link.split("key=")[1].split("&")[0]
            await asyncio.sleep(3)  # the view's first charts drawn; then its own cost alone
            before = {pid: cpu_seconds(pid) for pid in url.pids}
            await asyncio.sleep(TEACHER_ALONE_S)
            teacher_alone = sum(cpu_seconds(pid) - before[pid] for pid in url.pids) / TEACHER_ALONE_S * 60

            c.start = time.monotonic()
            c.until = c.start + minutes * 60
            busy0 = machine_busy()
            c.app.read(url.pids)
            c.harness.read(c.harness_pids())
            watcher = asyncio.create_task(watch_teacher(c, teacher, link))
            sampler = asyncio.create_task(sample(c))
            killer = asyncio.create_task(fault(c))
            await asyncio.gather(*(browser_slot(c, browser, slot, code) for slot in range(students)))
            c.walks_ended = c.clock()
            c.app.read(p for p in url.pids if p in c.app.base)
            c.harness.read(c.harness_pids())
            busy = machine_busy() - busy0
            c.walking = False
            await asyncio.gather(killer, sampler)
            await watcher
            rss = []
            for pid in url.pids:
                try:
                    rss.append(psutil.Process(pid).memory_info().rss / 2**20)
                except psutil.Error:
                    rss.append(None)
            await browser.close()
        stored = class_answers(teacher_class(code, secret))
    return result(c, stored, warmed, teacher_alone, busy, rss)


def key_of(question: str) -> str:
    """A question's key as its container's class names it (dots and the like as dashes)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", question)


def result(c: Class, stored, warmed: dict, teacher_alone: float, busy: float, rss: list) -> dict:
    kill_at = c.killed_at if c.killed_at is not None else float("inf")

    def failover(at: float) -> bool:
        return kill_at <= at < kill_at + FAILOVER_S

    kept = {(row.student, "lesson-" + key_of(row.question)): row.choice for row in stored}
    lost, wrong_choice, lags, lag_rows = [], [], [], []
    for w in c.walks:
        n = 0
        for k in w.commits:
            if k.seconds is None:
                continue
            n += 1
            if (w.name, k.question) not in kept:
                lost.append(f"{w.name}: {k.question} ({k.choice!r}, acknowledged at {k.acked_at:.1f} s)")
            elif from_visible_spaces(k.choice) != kept[(w.name, k.question)]:
                wrong_choice.append(f"{w.name}: {k.question}: clicked {k.choice!r}, kept "
                                    f"{kept[(w.name, k.question)]!r}")
            seen = c.seen.get((w.name, n))
            lag = None if seen is None else max(0.0, seen - k.acked_at)
            lag_rows.append((k.acked_at, lag))
            lags.append(lag)
    commits = [k for w in c.walks for k in w.commits]
    opens = [o for w in c.walks for o in w.opens]
    wall = c.walks_ended
    student_minutes = sum(w.ended - w.started for w in c.walks) / 60
    app_cpu = c.app.used()
    harness_cpu = c.harness.used()
    students_cpu = app_cpu - teacher_alone * wall / 60  # the teacher's view alone, for as long, taken out
    per_student_minute = students_cpu / student_minutes if student_minutes else float("nan")
    walks_done = sum(k.seconds is not None for k in commits) / c.questions  # walks' worth of answers
    per_walk = students_cpu / walks_done if walks_done else float("nan")
    lesson_minutes = ROUTES[c.route].minutes
    # Actions: each page load by the join link, join, Start/Next, commit and "Show it here" click.
    actions = len(commits) + len(opens) + sum(w.join_s is not None for w in c.walks) + sum(w.shows for w in c.walks)
    per_action = students_cpu / actions if actions else float("nan")
    # The fastest this think time allows: an action every mean think time, the page's own wait counted as nothing.
    per_student_minute_bound = per_action * 60 / statistics.mean(c.think)
    measured = per_student_minute > 0  # a run too short or too noisy to tell the students from the teacher: none
    per_core = UTILISATION * 60 / per_student_minute if measured else None
    per_core_bound = UTILISATION * 60 / per_student_minute_bound if measured else None
    per_core_lesson = UTILISATION * lesson_minutes * 60 / per_walk if measured else None
    cores = (math.ceil((teacher_alone + CLASS_SIZE * per_student_minute_bound) / (UTILISATION * 60)) if measured
             else None)
    by_page = {}
    for o in opens:
        by_page.setdefault(o.page, []).append(o.seconds)
    pids = list(c.app.last)
    return {
        "route": c.route, "pages": list(c.pages), "questions": c.questions, "students": c.students,
        "processes": len(c.url.pids), "laps": c.laps, "minutes_limit": c.minutes, "think_s": list(c.think),
        "seed": c.seed, "cores": os.cpu_count(), "gpu": "none",
        "walks": len(c.walks), "walks_finished": sum(w.finished for w in c.walks), "wall_s": wall,
        "student_minutes": student_minutes,
        "ack_s": summary(k.seconds for k in commits),
        "ack_steady_s": summary(k.seconds for k in commits if k.seconds is not None and not failover(k.at)),
        "ack_failover_s": summary(k.seconds for k in commits if k.seconds is not None and failover(k.at)),
        "unacknowledged": sum(k.seconds is None for k in commits),
        "commits_not_acknowledged": {o: sum(k.outcome == o for k in commits) for o in ("not taken", "timeout")},
        "commits_clicked_again": sum(k.clicks > 1 for k in commits),
        "commits_clicked_again_after_kill_s": [round(k.at - kill_at, 1) for k in commits if k.clicks > 1],
        "ack_first_click_s": summary(k.seconds for k in commits if k.clicks == 1),
        "teacher_lag_s": summary(lags),
        "teacher_lag_steady_s": summary(lag for at, lag in lag_rows if not failover(at)),
        "teacher_never_counted": sum(lag is None for lag in lags),
        "page_open_s": summary(o.seconds for o in opens if o.how != "link"),
        "page_open_by_page_s": {p: summary(xs) for p, xs in by_page.items()},
        "join_s": summary(w.join_s for w in c.walks),
        "page_open_failed": {o: sum(k.outcome == o for k in opens) for o in ("not taken", "reconnected", "timeout")},
        "answers_acknowledged": sum(k.seconds is not None for k in commits), "answers_stored": len(stored),
        "lost_answers": len(lost), "lost": lost, "choice_mismatches": wrong_choice,
        "kill": c.kill,
        "cpu": {"app_s": app_cpu,
                "app_per_process_s": [c.app.last[p] - c.app.base[p] for p in pids],
                "app_pids": pids,
                "harness_s": harness_cpu, "machine_busy_s": busy, "machine_cores_busy": busy / wall if wall else None,
                "other_s": busy - app_cpu - harness_cpu,
                "other_cores": (busy - app_cpu - harness_cpu) / wall if wall else None,
                "teacher_alone_s_per_min": teacher_alone, "students_s": students_cpu,
                "warm_up_s_per_process": warmed["cpu_s"],
                "per_student_minute_s": per_student_minute, "per_walk_s": per_walk, "per_action_s": per_action,
                "per_student_minute_at_think_pace_s": per_student_minute_bound},
        "actions": actions, "actions_per_student_minute": actions / student_minutes if student_minutes else None,
        "rss_mb_at_end": rss,
        "students_per_core": per_core, "students_per_core_at_think_pace": per_core_bound,
        "students_per_core_lesson_pace": per_core_lesson, "lesson_minutes": lesson_minutes,
        "rule": f"a student's demand = (app CPU-s over the walk - the teacher's view alone x the walk's minutes) / "
                f"student-minutes; students per core = {UTILISATION} x 60 s / that demand. At think pace: the same "
                f"CPU per action x one action every mean think time ({statistics.mean(c.think):g} s). Cores for "
                f"{CLASS_SIZE} = ceil((the teacher's view + {CLASS_SIZE} x the think-pace demand) / "
                f"({UTILISATION} x 60 s)). "
                f"Lesson pace: {UTILISATION} x {lesson_minutes} min x 60 s / (CPU per walk of the route)",
        f"cores_for_{CLASS_SIZE}": cores,
        "errors": [f"{w.name}: {e}" for w in c.walks for e in w.errors],
        "walks_detail": [asdict(w) for w in c.walks],
    }


def fmt(s: dict | None, unit: str = " s") -> str:
    if not s:
        return "none"
    return (f"median {s['median']:.2f}{unit}, p90 {s['p90']:.2f}{unit}, min {s['min']:.2f}{unit}, "
            f"max {s['max']:.2f}{unit} (n {s['n']})")


def report(r: dict) -> str:
    cpu, k = r["cpu"], r["kill"]
    lines = [
        f"Class soak: route {r['route']} ({', '.join(r['pages'])}; {r['questions']} questions), {r['students']} "
        f"students x {r['laps']} lap(s), {r['processes']} app processes behind nginx, think {r['think_s'][0]:g}-"
        f"{r['think_s'][1]:g} s; {r['cores']} cores, no GPU.",
        f"  walks: {r['walks']} ({r['walks_finished']} to the route's end) in {r['wall_s']:.0f} s; "
        f"{r['student_minutes']:.1f} student-minutes",
        f"  ack (commit -> 'Ask me again'):     {fmt(r['ack_s'])}",
        f"    steady (not within {FAILOVER_S} s of the kill): {fmt(r['ack_steady_s'])}",
        f"    taken at the first click: {fmt(r['ack_first_click_s'])}",
        f"    unacknowledged: {r['unacknowledged']} {r['commits_not_acknowledged']}",
        f"  teacher lag (ack -> counted):       {fmt(r['teacher_lag_s'])}",
        f"    steady: {fmt(r['teacher_lag_steady_s'])}; never counted: {r['teacher_never_counted']}",
        f"  page open (click -> idle):          {fmt(r['page_open_s'])}; clicks not taken or timed out: "
        f"{r['page_open_failed']}",
        *(f"    {p}: {fmt(s)}" for p, s in r["page_open_by_page_s"].items()),
        f"  join (click -> joined):             {fmt(r['join_s'])}",
        f"  kill: {k.get('victim')} at {k.get('at_s', float('nan')):.0f} s ({k.get('students_on_it')} of "
        f"{k.get('students_walking')} walking students on it; teacher on it: {k.get('teacher_on_it')}); back in "
        f"{k.get('revive_s', float('nan')):.1f} s, its start-up {k.get('restart_cpu_s') or float('nan'):.1f} CPU-s",
        f"  answers: {r['answers_acknowledged']} acknowledged, {r['answers_stored']} stored, LOST {r['lost_answers']}"
        f", choice mismatches {len(r['choice_mismatches'])}",
        f"  CPU over the walk: app {cpu['app_s']:.1f} s (per process "
        + ", ".join(f"{x:.1f}" for x in cpu["app_per_process_s"]) + f"), harness (Chromium, driver) "
        f"{cpu['harness_s']:.1f} s, machine {cpu['machine_busy_s']:.1f} s = {cpu['machine_cores_busy']:.2f} cores "
        f"busy, other {cpu['other_s']:.1f} s"
        + (f" (the machine ran other work meanwhile: {cpu['other_cores']:.2f} cores on average; the latencies are the "
           "worse for it)" if (cpu["other_cores"] or 0) > OTHER_CORES else ""),
        f"    teacher's view alone: {cpu['teacher_alone_s_per_min']:.2f} CPU-s a minute; warm-up per process: "
        + ", ".join(f"{x:.1f}" for x in cpu["warm_up_s_per_process"]) + " CPU-s",
        f"  app CPU, the teacher's view taken out: {cpu['per_action_s']:.3f} s an action, {cpu['per_walk_s']:.1f} s a "
        f"walk of the route, {cpu['per_student_minute_s']:.2f} s a student-minute at the pace walked ("
        f"{r['actions_per_student_minute']:.1f} actions a minute), {cpu['per_student_minute_at_think_pace_s']:.2f} s "
        f"at think pace (one action every {statistics.mean(r['think_s']):g} s)",
        "  RSS at end: " + ", ".join("gone" if x is None else f"{x:.0f} MB" for x in r["rss_mb_at_end"]),
        f"  students per core ({UTILISATION:.0%} of a core): {r['students_per_core'] or float('nan'):.1f} at the pace "
        f"walked, {r['students_per_core_at_think_pace'] or float('nan'):.1f} at think pace; CPU alone, a walk "
        f"spread over the route's {r['lesson_minutes']} lesson minutes: "
        f"{r['students_per_core_lesson_pace'] or float('nan'):.0f}",
        f"  {CLASS_SIZE} students and their teacher at think pace: {r[f'cores_for_{CLASS_SIZE}']} cores at "
        f"{UTILISATION:.0%} (`make class PROCESSES={r[f'cores_for_{CLASS_SIZE}']}`: one process a core)",
        f"  commits clicked again (the first click not taken: the page idle, the question still open): "
        f"{r['commits_clicked_again']}" + ("" if not r["commits_clicked_again"] else ", at " + ", ".join(
            f"{x:+.0f}" for x in r["commits_clicked_again_after_kill_s"]) + " s from the kill"),
        f"  errors: {len(r['errors'])}",
        *(f"    {e}" for e in r["errors"][:20]),
    ]
    return "\n".join(lines)


def main() -> int:
    students = env_int("CLASS_STUDENTS", 8)
    processes = env_int("CLASS_PROCESSES", 2)
    route = os.environ.get("CLASS_ROUTE", "toy-45")
    if route not in ROUTES:
        print(f"CLASS_ROUTE must be one of {', '.join(ROUTES)}", file=sys.stderr)
        return 2
    laps = env_int("CLASS_LAPS", 1)
    minutes = float(os.environ.get("CLASS_MINUTES", 6))
    low, high = (float(x) for x in os.environ.get("CLASS_THINK", "2-5").split("-"))
    seed = env_int("CLASS_SEED", 33)
    # The class's answers go to a database of the run's own, never the user's (the app processes inherit it).
    if "ATTENTION_EXPLORER_DATABASE_URL" not in os.environ:
        os.environ["ATTENTION_EXPLORER_DATA"] = tempfile.mkdtemp(prefix="class-soak-")
    r = asyncio.run(run_class(students, processes, route, laps, minutes, (low, high), seed))
    results = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    results[route] = r
    RESULT.write_text(json.dumps(results, indent=1, default=str))
    print(report(r))
    print(f"Written: {RESULT} ({route})")
    return 0 if r["lost_answers"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
