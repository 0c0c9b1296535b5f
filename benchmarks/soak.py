"""`make soak`: the app as a class uses it, for 20 minutes, then one of its processes killed.

    python -m benchmarks.soak [--minutes 20] [--sessions 8] [--seed 33] [--out docs/benchmarks.md]

Two app processes behind nginx (serving.running_class, as `make class` serves a class), and `--sessions`
browser sessions (each its own context in one headless Chromium, so its own sticky cookie) that walk the
pages for `--minutes`: from the sidebar to a page of the learner's path or a model page, now and then a
shared link opened afresh, and on each page a random input (a slider moved with the keyboard, a new
sentence typed into the page's text box). Inputs come from a fixed seed, so two runs ask the same things.

Recorded: every action's time from the input to the page idle again (per minute: p95), every error a
page shows (an exception, an error box, a lost connection, an action with no answer: no run ended and no
progress bar moved for 3 min) with its text, and each app process's RSS once a minute. Targets (issue 33):
0 errors; p95 page time not growing (the last 5 minutes' p95 over that of minutes 2-6, <= 1.2); RSS after
minute 5 within 10 % of minute 5 (the last 5 minutes' median; the peak is shown beside it).

Then the fault: once every session is idle, one app process is killed (SIGKILL) and every session
acts 3 more times. The sessions it served must show Streamlit's reconnect, come back on the other process
and work; the others must see nothing. The kill comes after the measured minutes, so the RSS and page
time figures are the soak's, not the failover's.

The result goes to benchmarks/soak.json and its section of docs/benchmarks.md (benchmarks.run keeps it
when it rewrites the file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from attention.toy import examples as ex
from benchmarks.browser import PAGE_ERRORS, percentile
from serving import running_class
from tests.harness import CHROMIUM, CHROMIUM_ARGS, DONE, page_url, returning_learner

RESULT = Path(__file__).with_name("soak.json")
SECTION = "## 11. Soak: a class for 20 minutes, then a process killed"
LEARNER = ["lookup", "self_attention", "scaling", "scoring", "multihead", "toy_ambiguity", "positions", "bottleneck"]
MODEL = ["model_heads", "inside_head", "ambiguous_words", "head_atlas", "predictions", "what_heads_do", "corpus"]
SENTENCES = [*ex.BANK_SENTENCES, *ex.IT_SENTENCES, *ex.PLANT_SENTENCES,
             *(prompt for prompt, _, _ in ex.PREDICTION_EXAMPLES.values())]
EXTRA = ["today", "again", "slowly", "at noon", "in the rain", "last week", "with care", "by the door"]
TIMEOUT_MS = 180_000  # no answer: nothing ended and no progress bar moved for this long
PROGRESS = "() => [...document.querySelectorAll(\"[data-testid='stProgress']\")].map(e => e.innerText).join('|')"
# Sees Streamlit's connection status appear at any moment (a reconnect shows it for ~2 s).
WATCH_CONNECTION = """() => { if (window.__lost !== undefined) return; window.__lost = 0;
  new MutationObserver(() => { if (document.querySelector("[data-testid='stConnectionStatus']")) window.__lost += 1; })
    .observe(document.body, {childList: true, subtree: true}); }"""

# Where a page stood when an action got no answer: its address, Streamlit's script state, runs counted.
STANDING = """() => ({path: location.pathname + location.search.slice(0, 60),
  shows: [...document.querySelectorAll("[data-testid='stProgress'], [data-testid='stSpinner']")]
    .map(e => e.innerText.slice(0, 80)),
  state: document.querySelector("[data-testid='stApp']")?.getAttribute('data-test-script-state'),
  status: document.querySelector("[data-testid='stStatusWidget']")?.innerText.slice(0, 80)})"""

RECONNECTED = "() => window.__lost > 0 && !document.querySelector(\"[data-testid='stConnectionStatus']\")"


@dataclass(frozen=True)
class Action:
    session: int
    at: float  # seconds since the soak began
    kind: str  # "open" (a shared link, a full load), "go" (the sidebar), "slider", "text"
    page: str
    seconds: float | None  # input -> page idle again; None when it did not come
    errors: tuple[str, ...]  # what the page showed (PAGE_ERRORS), or that no answer came
    phase: str = "soak"  # "soak", or "after the kill"
    long_work: bool = False  # the page showed a progress bar on the way (idle_after)
    unfinished: str = ""  # long work still moving when the walk ended: what its bar showed (StillMoving)


class StillMoving(Exception):
    """Long work whose progress bar was still moving when the walk ended: not an error (the work goes on,
    nothing is lost), and not a page time either; the soak reports it apart."""


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SENTENCES)} {rng.choice(EXTRA)}"


async def new_text(field, rng: random.Random) -> str:
    """A sentence for `field` that differs from what it holds once cut to its length limit (a box that keeps
    40 characters would otherwise get the same text twice, and an unchanged box starts no run)."""
    text, limit = sentence(rng), int(await field.get_attribute("maxlength") or 10**6)
    now = await field.input_value()
    while text[:limit] == now:
        text = f"{rng.choice(EXTRA)} {rng.randrange(1000)} {text}"
    return text


class Runs:
    """Counts the script runs a page's server has finished, from Streamlit's own messages on the page's
    websocket (a ForwardMsg script_finished: a whole run or a fragment's, not one cut short for a rerun).
    The app's state attribute in the DOM missed fast runs: React drew "running" and "notRunning" in one
    render, so a page that had changed and was idle counted no run (make soak: 29 actions "no answer" whose
    page was the one asked for, idle). A reconnect opens a new websocket: it is followed too."""

    def __init__(self, page):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.ended, self._message = 0, ForwardMsg
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if not isinstance(payload, bytes):
            return
        msg = self._message()
        try:
            msg.ParseFromString(payload)
        except Exception:  # not a ForwardMsg
            return
        if msg.WhichOneof("type") == "script_finished" and msg.script_finished != msg.FINISHED_EARLY_FOR_RERUN:
            self.ended += 1


async def idle_after(page, runs: Runs, before: int, doing: dict) -> None:
    """Wait until a script run has ended since `before` had, and the page is idle. A page that shows long
    work's progress bar (a corpus survey, an ablation scan: minutes for SmolLM2 on 2 shared cores) is
    answering while the bar moves (doing["long_work"] says it showed one): it is waited for until the walk
    ends (doing["until"]), then StillMoving. Nothing ended and nothing moved for TIMEOUT_MS: no answer."""
    start = moved = time.monotonic()
    shown = ""
    while not (runs.ended > before and await page.query_selector(DONE)):
        now = time.monotonic()
        if (bar := await page.evaluate(PROGRESS)) != shown:
            shown, moved = bar, now
            doing["long_work"] = doing.get("long_work", False) or bool(bar)
        if now - moved > TIMEOUT_MS / 1000:
            raise TimeoutError(f"no run ended in {now - start:.0f} s, nothing moved for {now - moved:.0f} s")
        if shown and now > doing.get("until", float("inf")):
            raise StillMoving(f"{shown[:80]} after {now - start:.0f} s")
        await asyncio.sleep(0.1)


async def act(page, runs: Runs, url: str, rng: random.Random, here: str, doing: dict) -> tuple[str, str]:
    """One random action on `page` (showing page `here`); returns (kind, the page it ends on). `doing` says
    which, as soon as it is chosen (for an action that gets no answer)."""
    roll = rng.random()
    if roll < 0.08 or here == "":  # a shared link opened afresh: a new session on the same process
        target = rng.choice(LEARNER + MODEL)
        doing.update(kind="open", page=target)
        params = {"text": sentence(rng)} if target in MODEL[:3] else {}
        await page.goto(page_url(url, target, **params), timeout=TIMEOUT_MS)
        await page.wait_for_selector(DONE, timeout=TIMEOUT_MS)
        await page.evaluate(WATCH_CONNECTION)
        await page.wait_for_selector(DONE, timeout=TIMEOUT_MS)
        return "open", target
    before = doing["runs"] = runs.ended
    # What the reader can reach: not the inputs of a tab that is not open, not a disabled one.
    box = page.locator("[data-testid='stTextArea'] textarea:visible:enabled, "
                       "[data-testid='stTextInput'] input:visible:enabled")
    sliders = page.locator("[data-testid='stSlider'] [role='slider']:visible")
    if roll < 0.45 or not (await box.count() or await sliders.count()):  # the sidebar: same session, another page
        target = rng.choice([p for p in LEARNER + MODEL if p != here])
        doing.update(kind="go", page=target)
        await page.locator(f"[data-testid='stSidebarNav'] a[href$='/{target}']").first.click(timeout=TIMEOUT_MS)
        await idle_after(page, runs, before, doing)
        return "go", target
    if await box.count() and (roll < 0.75 or not await sliders.count()):
        field = box.nth(rng.randrange(await box.count()))
        doing.update(kind="text")
        text = await new_text(field, rng)
        await field.fill(text, timeout=TIMEOUT_MS)
        if await field.input_value() != text:  # longer than the box takes (Streamlit's max_chars): a short one
            await field.fill(f"{rng.choice(EXTRA)} {rng.randrange(1000)}", timeout=TIMEOUT_MS)
        await field.press("Control+Enter" if await field.evaluate("e => e.tagName") == "TEXTAREA" else "Enter")
        await idle_after(page, runs, before, doing)
        return "text", here
    slider = sliders.nth(rng.randrange(await sliders.count()))
    doing.update(kind="slider")
    await slider.focus(timeout=TIMEOUT_MS)
    at_max = await slider.get_attribute("aria-valuenow") == await slider.get_attribute("aria-valuemax")
    await slider.press("ArrowLeft" if at_max else "ArrowRight")  # always a new value: always a run
    await idle_after(page, runs, before, doing)
    return "slider", here


async def session(n: int, browser, url: str, seed: int, start: float, until: float, actions: list[Action],
                  phase: str, state: dict, most: int | None = None) -> None:
    """Session `n` acts until `until` (monotonic seconds) or `most` actions; state keeps its page between
    phases."""
    if n not in state:
        context = await browser.new_context(viewport={"width": 1280, "height": 900})
        # A reader who has opened every page whole before: the walk acts on the pages, not on their questions
        # (benchmarks/class_soak.py is a class answering them).
        await context.add_cookies([returning_learner(url, LEARNER + MODEL)])
        page = await context.new_page()
        state[n] = {"page": page, "runs": Runs(page), "here": "", "rng": random.Random(seed * 100 + n),
                    "context": context}
    s = state[n]
    done = 0
    while time.monotonic() < until and (most is None or done < most):
        t0 = time.monotonic()
        doing, errors = {"kind": "?", "page": s["here"], "until": until}, []
        try:
            doing["kind"], s["here"] = await act(s["page"], s["runs"], url, s["rng"], s["here"], doing)
            doing["page"] = s["here"]
            seconds = time.monotonic() - t0
        except StillMoving as e:  # the walk is over; the work goes on
            seconds, doing["unfinished"] = None, str(e)
        except Exception as e:  # a timeout, a page that went away: the action had no answer
            seconds, errors = None, [f"no answer: {type(e).__name__}: {str(e).splitlines()[0][:200]}"]
            try:
                standing = await s["page"].evaluate(STANDING)
                errors[0] += f" (runs ended before: {doing.get('runs')}, now {s['runs'].ended}; page then: {standing})"
                s["here"] = standing["path"].split("?")[0].strip("/")  # where the reader is now
            except Exception:
                pass
        try:
            errors += await s["page"].evaluate(PAGE_ERRORS)
        except Exception as e:
            errors.append(f"page unreadable: {type(e).__name__}")
        actions.append(Action(n, t0 - start, doing["kind"], doing["page"], seconds, tuple(errors), phase,
                              doing.get("long_work", False), doing.get("unfinished", "")))
        done += 1


def rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


async def sample_rss(pids: list[int], start: float, until: float, out: list[dict]) -> None:
    while time.monotonic() < until + 1:
        out.append({"at": time.monotonic() - start, "rss_mb": [rss_mb(p) for p in pids]})
        await asyncio.sleep(60)


async def soak(minutes: float, sessions: int, seed: int) -> dict:
    from playwright.async_api import async_playwright

    with running_class(2) as url:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            actions, rss, state = [], [], {}
            start = time.monotonic()
            until = start + minutes * 60
            await asyncio.gather(sample_rss(url.pids, start, until, rss),
                                 *(session(n, browser, url, seed, start, until, actions, "soak", state)
                                   for n in range(sessions)))
            # The fault: every session idle, then one process killed; each session acts 3 more times.
            owners = {}
            for n, s in state.items():
                cookies = await s["context"].cookies()
                owners[n] = next((c["value"] for c in cookies if c["name"] == "explorer_backend"), "")
                await s["page"].evaluate("() => { window.__lost = 0; }")
            victim = url.backends[0]
            os.kill(url.pids[0], signal.SIGKILL)
            killed_at = time.monotonic() - start
            # Its sessions act once Streamlit's reconnect has come and gone, as a user sees it do; the
            # others at once. (In a trial, actions begun at once after the kill got no answer in 3 min.)
            reconnected = {}
            for n, s in state.items():
                if owners[n] == victim:
                    try:
                        await s["page"].wait_for_function(RECONNECTED, timeout=120_000, polling=50)
                        reconnected[n] = time.monotonic() - start - killed_at
                    except Exception:
                        reconnected[n] = None
            await asyncio.gather(*(session(n, browser, url, seed, start, float("inf"), actions, "after the kill",
                                           state, most=3) for n in range(sessions)))
            lost = {n: await s["page"].evaluate("() => window.__lost") for n, s in state.items()}
            await browser.close()
        log_tail = {str(p): Path(p).read_text(errors="replace")[-3000:] for p in url.app_logs}
    return {"minutes": minutes, "sessions": sessions, "seed": seed, "processes": 2, "killed_at": killed_at,
            "victim": victim, "owners": owners, "reconnect_seen": lost,
            "reconnected_after_s": reconnected, "actions": [asdict(a) for a in actions],
            "rss": rss, "server_logs": log_tail}


def summarise(r: dict) -> dict:
    """The targets' figures from a soak's raw result."""
    soak_actions = [a for a in r["actions"] if a["phase"] == "soak"]
    per_minute = {}
    for a in soak_actions:
        per_minute.setdefault(int(a["at"] // 60), []).append(a)
    minutes = [{"minute": m + 1, "actions": len(acts),
                "p95_s": percentile([a["seconds"] for a in acts if a["seconds"] is not None] or [float("nan")], 0.95),
                "errors": sum(bool(a["errors"]) for a in acts)} for m, acts in sorted(per_minute.items())]

    def pooled_p95(first: int, last: int) -> float:  # minutes counted from 1, both ends included
        xs = [a["seconds"] for a in soak_actions if first <= a["at"] // 60 + 1 <= last and a["seconds"] is not None]
        return percentile(xs, 0.95) if xs else float("nan")

    total = max(len(minutes), 1)
    early, late = pooled_p95(2, 6), pooled_p95(max(total - 4, 7), total)
    rss = [x["rss_mb"] for x in r["rss"]]
    base = rss[min(5, len(rss) - 1)] if rss else []
    # Growth: what a process keeps (the median of its last 5 minutes), not a job's working memory for a
    # minute (a survey's sample, an ablation's copies), which the peak shows.
    growth = [statistics.median([row[i] for row in rss[5:][-5:] if row[i] is not None] or [base[i]]) / base[i]
              for i in range(len(base)) if base[i]]
    peak = [max((row[i] for row in rss[5:] if row[i] is not None), default=base[i]) / base[i]
            for i in range(len(base)) if base[i]]
    long_work = [a["seconds"] for a in soak_actions if a.get("long_work") and a["seconds"] is not None]
    after = [a for a in r["actions"] if a["phase"] == "after the kill"]
    victims = {int(n) for n, owner in r["owners"].items() if owner == r["victim"]}  # JSON keys are strings
    lost = {int(n): count for n, count in r["reconnect_seen"].items()}
    role = {n: "victim" if n in victims else "survivor" for n in lost}
    firsts, seen = {"victim": [], "survivor": []}, set()  # each session's first action after the kill
    for a in after:
        if a["session"] not in seen and a["seconds"] is not None:
            seen.add(a["session"])
            firsts[role[a["session"]]].append(a["seconds"])
    errors = [f"minute {int(a['at'] // 60) + 1}, session {a['session'] + 1}, {a['kind']} on {a['page']}: "
              + "; ".join(a["errors"]) for a in soak_actions if a["errors"]]
    unfinished = [f"session {a['session'] + 1}, {a['kind']} on {a['page']} at minute {int(a['at'] // 60) + 1}: "
                  f"{a['unfinished']}" for a in soak_actions if a.get("unfinished")]
    return {"minutes": minutes, "actions": len(soak_actions), "errors": errors, "unfinished": unfinished,
            "p95_early_s": early, "p95_late_s": late, "p95_growth": late / early, "rss_growth": growth,
            "rss_peak": peak, "long_work_s": long_work,
            "median_s": statistics.median([a["seconds"] for a in soak_actions if a["seconds"] is not None]),
            "after_kill": {"victim_sessions": len(victims), "survivor_sessions": len(lost) - len(victims),
                           # seen while waiting for it (a later shared link opened afresh resets the page's count)
                           "victims_reconnect_seen": sum(1 for n, s in r["reconnected_after_s"].items()
                                                         if int(n) in victims and s is not None),
                           "survivors_reconnect_seen": sum(1 for n in lost if n not in victims and lost[n] > 0),
                           "errors": [f"session {a['session'] + 1} ({role[a['session']]}), {a['kind']}: "
                                      + "; ".join(a["errors"]) for a in after if a["errors"]],
                           "first_action_s": firsts}}


def lines(r: dict) -> list[str]:
    """The soak's section of docs/benchmarks.md."""
    s = summarise(r)
    rss_rows = [f"| {row['at'] / 60:.0f} | " + " | ".join(f"{x:.0f} MB" if x else "gone" for x in row["rss_mb"]) + " |"
                for row in r["rss"]]
    k = s["after_kill"]
    return [
        SECTION, "",
        f"`make soak` (benchmarks/soak.py): {r['processes']} app processes behind nginx (`make class`), "
        f"{r['sessions']} browser sessions in one headless Chromium on the same 2 cores, {r['minutes']:g} minutes of "
        f"random walking from seed {r['seed']}: pages of the learner's path and model pages by the sidebar, shared "
        "links opened afresh, sliders moved with the keyboard, new sentences typed. Page time: the input → the page "
        "idle again.", "",
        "| target | result | met |", "| --- | --- | --- |",
        f"| errors: 0 | {len(s['errors'])} in {s['actions']} actions | {'yes' if not s['errors'] else '**no**'} |",
        f"| p95 page time not growing: last 5 minutes ÷ minutes 2–6 <= 1.2 | {s['p95_growth']:.2f} "
        f"({s['p95_late_s']:.2f} s vs {s['p95_early_s']:.2f} s) | {'yes' if s['p95_growth'] <= 1.2 else '**no**'} |",
        "| RSS after minute 5 within 10 % of minute 5, each process (the last 5 minutes' median; the peak) | "
        + ", ".join(f"{g:.3f} ({p:.3f})" for g, p in zip(s["rss_growth"], s["rss_peak"], strict=True))
        + f" | {'yes' if s['rss_growth'] and max(s['rss_growth']) <= 1.10 else '**no**'} |",
        f"| a process killed: its sessions reconnect and work, the others see nothing | {k['victim_sessions']} "
        f"sessions on it, {k['victims_reconnect_seen']} showed the reconnect; {len(k['errors'])} errors after; "
        f"{k['survivors_reconnect_seen']} of {k['survivor_sessions']} others saw a reconnect | "
        f"{'yes' if not k['errors'] and not k['survivors_reconnect_seen'] else '**no**'} |", "",
        "After the kill, the killed process's sessions were back (Streamlit's reconnect shown and gone) in "
        + (", ".join("never" if x is None else f"{x:.1f} s" for x in r["reconnected_after_s"].values()) or "(none)")
        + f". All actions: median {s['median_s']:.2f} s. After the kill, each session's first action: "
        + "; ".join(f"{who} sessions {statistics.median(xs):.2f} s (max {max(xs):.2f} s)"
                    for who, xs in k["first_action_s"].items() if xs) + ". "
        + (f"Actions whose page showed a progress bar on the way (model work over 0.3 s: a text's attention, a "
           f"survey, a scan), waited for while it moved: {len(s['long_work_s'])}, median "
           f"{statistics.median(s['long_work_s']):.1f} s, max {max(s['long_work_s']):.1f} s (in the page times "
           "above)." if s["long_work_s"] else "")
        + (" Long work still moving when the walk ended (not an error: it went on; no page time): "
           + "; ".join(s["unfinished"]) + "." if s.get("unfinished") else ""), "",
        "| minute | actions | p95 page time | errors |", "| --- | --- | --- | --- |",
        *(f"| {m['minute']} | {m['actions']} | {m['p95_s']:.2f} s | {m['errors']} |" for m in s["minutes"]), "",
        "| minutes in | " + " | ".join(f"RSS, process {i + 1}" for i in range(r["processes"])) + " |",
        "| --- |" + " --- |" * r["processes"], *rss_rows, "",
        "Process 1 is the one killed after the soak. What a process's growth after minute 5 is made of (a corpus "
        "survey's sample of queries and keys, built up text by text: 80 MB for SmolLM2) is in benchmarks/NOTES.md "
        "(\"The soak\").", "",
        *error_lines(s["errors"] + k["errors"]),
    ]


def error_lines(errors: list[str]) -> list[str]:
    """Each kind of error once (its first line, numbers and words after the colon dropped), how many times,
    and where it was first seen; benchmarks/soak.json keeps every one whole."""
    if not errors:
        return ["Errors seen: none."]
    kinds: dict[str, list[str]] = {}
    for e in errors:
        where, _, what = e.partition(": ")
        kinds.setdefault(what.splitlines()[0][:160], []).append(where)
    return ["Errors seen, by kind (benchmarks/soak.json has each whole):", "",
            *(f"- {len(wheres)} × “{what}” (first: {wheres[0]})" for what, wheres in kinds.items())]


def section_main(argv, measure, lines, title: str, doc: str) -> int:
    """The command line of a benchmark measured on its own (benchmarks.comparison, benchmarks.images): measure,
    print its section, and splice it into docs/benchmarks.md; with --smoke, its smallest run, nothing written.
    `doc` is the module's docstring (its first line is the help)."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"))
    args = ap.parse_args(argv)
    section = lines(measure(args.smoke))
    print("\n".join(section))
    if not args.smoke:
        splice(Path(args.out), section, title)
    return 0


def splice(doc: Path, section: list[str], title: str = SECTION) -> None:
    """Put a section headed `title` (the soak's, or another measured on its own) into docs/benchmarks.md where
    benchmarks.run puts it: in place of the one there (it runs to the next "## "), else before the notes
    (benchmarks/NOTES.md), else at the end."""
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    body = "\n".join(section) + "\n"
    notes = (Path(__file__).with_name("NOTES.md").read_text().splitlines() or [""])[0]
    if title in text:
        head, rest = text.split(title, 1)
        nxt = rest.find("\n## ")
        text = head + body + (rest[nxt:] if nxt >= 0 else "")
    elif notes.startswith("## ") and f"\n{notes}\n" in text:
        head, rest = text.split(f"\n{notes}\n", 1)
        text = head.rstrip("\n") + "\n\n" + body + f"\n{notes}\n" + rest
    else:
        text = text.rstrip("\n") + "\n\n" + body
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--out", default="docs/benchmarks.md")
    args = ap.parse_args(argv)
    r = asyncio.run(soak(args.minutes, args.sessions, args.seed))
    RESULT.write_text(json.dumps(r, indent=1))
    section = lines(r)
    splice(Path(args.out), section)
    print("\n".join(section))
    return 0


if __name__ == "__main__":
    sys.exit(main())
