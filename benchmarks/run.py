"""`make bench`: every figure in one run, written to docs/benchmarks.md.

    python -m benchmarks.run [--smoke] [--out PATH]

--smoke runs the smallest sizes only (part of `make test`, so the benchmark cannot rot).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import importlib.util
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from attention.toy import examples as ex
from benchmarks import browser as bb
from benchmarks import census as census_bench
from benchmarks import common, compute, path_steps, soak
from benchmarks import comparison as compared
from benchmarks import hooks as hook_bench
from benchmarks import images as image_bench
from benchmarks import slow_operations as slow
from benchmarks.elements_app import ELEMENTS

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {  # figure -> (target text, check)
    "live_frames": (">= 20 per 1-s drag", lambda r: r["browser"]["live"]["frames"]["median"] >= 20),
    "live_latency": ("p50 <= 16 ms", lambda r: r["browser"]["live"]["latency"]["median"] <= 16),
    "live_messages": ("0", lambda r: r["browser"]["live"]["messages"] == 0),
    "live_release": ("p50 <= 150 ms", lambda r: r["browser"]["live"]["release"]["median"] <= 150),
    "live_payload": ("<= 200 KB", lambda r: r["live_payload"] <= 200_000),
    "sentence16": ("<= 1 s", lambda r: r["browser"]["sentence16"]["median"] <= 1000),
    "sentence512": ("<= 1 s", lambda r: r["browser"]["sentence512"]["median"] <= 1000),
    "sentence16_floor": ("<= 3 x the trivial page (issue 69)", lambda r: _over_floor(r, 16) <= 3),
    "sentence512_floor": ("<= 3 x the floor", lambda r: _over_floor(r, 512) <= 3),
    "smollm2_2048": ("<= 1.3 x its plain forward pass", lambda r: _over_plain(r, 2048) <= 1.3),
    "smollm2_4096": ("<= 1.3 x its plain forward pass", lambda r: _over_plain(r, 4096) <= 1.3),
    "views": ("<= 1 s each", lambda r: max(v["median"] for v in r["browser"]["views"].values()) <= 1000),
    "result512": ("smaller than 95 MB (before)", lambda r: _long(r, "minilm", 512)["stored_mb"] < 95),
    "scan": ("<= 4 s", lambda r: r["effects"]["scan"]["median"] <= 4),
    "patching": ("<= 0.5 s", lambda r: r["effects"]["patching"]["median"] <= 0.5),
    "generate32": ("<= 5 s", lambda r: r["effects"]["generate32"]["median"] <= 5),
    "roles": ("<= 3 x a forward pass on the probe", lambda r: _times(r, "roles", "probe_forward") <= 3),
    "residual_patching": ("<= 2 x the exact scan", lambda r: _times(r, "residual_patching", "scan") <= 2),
    "kernel_layer": ("<= 1.3 x SDPA's layer", lambda r: _times(r, "kernel_layer", "sdpa_layer") <= 1.3),
    "lens": ("<= 1.2 x the unembedding of the same vectors (its floor)",
             lambda r: _times(r, "lens", "unembed_lens_vectors") <= 1.2),
    "grid_during_scan": ("<= 1.5 x the same grid alone", lambda r: _during_scan(r) <= 1.5),
    "payload128": ("<= 1/50 of BertViz", lambda r: _ratio(r, 128) <= 1 / 50),
    "payload512": ("<= 5 MB", lambda r: _grid(r, 512) <= 5e6),
    "minilm_load": ("<= 2 s", lambda r: _median(r["models"]["minilm_load"]) <= 2),
    "smollm2_cached": ("<= 5 s", lambda r: _median(r["models"]["smollm2_cached"]) <= 5),
    "rss": ("<= 2.5 GB", lambda r: r["browser"]["server_memory"]["VmHWM"] <= 2560),
}
LONG = (2048, 4096)  # SmolLM2 texts timed in the browser, tokens
PREVIOUS_SLIDER_MS = 124  # st.slider step -> chart updated, median of the last run that had it (commit 86b4639)
PREVIOUS_RESULT_MB = 95  # a 512-token MiniLM result when every layer's weights were kept (docs/benchmarks.md)


def _over_floor(r: dict, n: int) -> float:
    """Sentence -> grid on Model heads over the same texts -> idle on the trivial page (issue 46's floor)."""
    b = r["browser"]
    return b[f"sentence{n}"]["median"] / b[f"floor{n}"]["median"]


def _over_plain(r, n) -> float:
    """SmolLM2, n tokens: text submitted -> grid painted, over the model's own transformers forward pass on
    as many tokens with the same torch threads (section 5, same run; medians)."""
    return r["browser"][f"smollm2_{n}"]["median"] / 1000 / _long(r, "smollm2", n)["plain"]["median"]


def _during_scan(r) -> float:
    g = r["browser"]["grid_during_scan"]
    return g["during"]["median"] / g["alone"]["median"]


def _times(r, what, against) -> float:
    """How many times `against` (same run, medians) `what` takes."""
    return r["effects"][what]["median"] / r["effects"][against]["median"]


def _long(r, model, n):
    return next(x for x in r["long"] if x["model"] == model and x["n"] == n)


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def _row(r, n):
    return next(x for x in r["payload"] if abs(x["n"] - n) <= 2)


def _grid(r, n):
    return _row(r, n)["grid_bytes"]


def _ratio(r, n):
    row = _row(r, n)
    return row["grid_bytes"] / row["bertviz_bytes"]


def versions() -> str:
    from importlib.metadata import version

    pkgs = ["torch", "transformers", "streamlit", "plotly", "numpy", "playwright", "bertviz"]
    got = []
    for p in pkgs:
        try:
            got.append(f"{p} {version(p)}")
        except Exception:
            got.append(f"{p} (not installed)")
    chromium = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
    return ", ".join(got) + f", {chromium}"


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, " \
           f"Python {platform.python_version()}, {platform.platform()}"


def us(t: dict) -> str:
    return f"{t['median'] * 1e6:.1f} µs ({t['min'] * 1e6:.1f}–{t['max'] * 1e6:.1f})"


def ms(x):
    return f"{x:.1f} ms"


def s_(x):
    return f"{x:.2f} s"


def mb(b):
    return f"{b / 1e6:.2f} MB"


def class_lines(b: dict) -> list[str]:
    """Section 4's part on serving a class: CPU per interaction, and the load test."""
    cpu = b["cpu"]
    kinds = [k for k in cpu if k != "idle_rate"]
    lines = ["", "### A class on one machine", "",
             f"The server's CPU time per interaction (user + system seconds of the streamlit process, all threads, "
             f"from the action to the page idle again, less the process's idle rate of {cpu['idle_rate'] * 1000:.1f} "
             "ms per second):", "", "| interaction | CPU seconds, median (min–max, n) | one core, 2 s |",
             "| --- | --- | --- |"]
    for k in kinds:
        c = cpu[k]
        # n sessions acting at the same moment on one core: the last is served after n x c seconds.
        lines.append(f"| {k} | {c['median']:.3f} s ({c['min']:.3f}–{c['max']:.3f}, n={c['n']}) | "
                     f"{int(2 / max(c['median'], 1e-3))} at once |")
    lines += ["", "\"One core, 2 s\": how many sessions doing that at the same moment one core serves within 2 s "
              "(2 s ÷ the median; the server's share only: the browsers draw on their own machines)."]
    one, many = b.get("class_one"), b.get("class_nginx")
    if one:
        lines += ["", f"{one['sessions']} sessions (each its own browser context, all in one headless Chromium on "
                  f"this machine's cores too) on Model heads, MiniLM, each pressing Ctrl+Enter on a new 16-token "
                  f"sentence at the same moment; sentence → grid painted on each session's own clock, "
                  f"{one['rounds']} rounds:", "",
                  "| served by | median | p95 | max | errors |", "| --- | --- | --- | --- | --- |",
                  f"| one app process (`make run`) | {one['median']:.0f} ms | {one['p95']:.0f} ms | "
                  f"{one['max']:.0f} ms | {one['errors']} |"]
        if many:
            lines += [f"| {many['processes']} app processes behind nginx (`make class`) | {many['median']:.0f} ms | "
                      f"{many['p95']:.0f} ms | {many['max']:.0f} ms | {many['errors']} |", "",
                      f"p95 with {many['processes']} processes ÷ p95 with one: {many['p95'] / one['p95']:.2f}. "
                      "Peak RSS of each app process after the test: "
                      + ", ".join(f"{x:.0f} MB" for x in many["rss_mb"]) + "."]
        else:
            lines += ["", "Behind nginx: not measured (/usr/sbin/nginx is not installed: `make nginx`)."]
        for run, name in ((one, "one process"), (many, "behind nginx")):
            if run and run["error_texts"]:
                lines += ["", f"What the sessions with an error showed ({name}): "
                          + "; ".join(f"“{t}”" for t in run["error_texts"])]
            if run and run["server_errors"]:
                lines += ["", f"What the app processes logged ({name}): "
                          + "; ".join(f"`{t}`" for t in run["server_errors"])]
            elif run:
                lines += ["", f"The app processes' logs ({name}): no traceback, no error line."]
    return lines


def corpus_lines(c: dict) -> list[str]:
    """Section 7: the corpus survey against the model's own forward passes over the same texts, and its views."""
    lines = ["", "## 7. A head across a corpus (the default corpus, a child process with the server's malloc settings)",
             "", "The survey (our kernel, the per-text survey, the running top-20 per head, the sample of q and k) "
             "against the model's plain forward passes (sdpa, nothing captured) over the same token ids, each text "
             "with the threads the server gives its length; medians (min–max, n) of the same run.", "",
             "| model | texts | tokens | forward passes | corpus survey | ratio | peak RSS growth |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, x in c.items():
        f, s = x["forward"], x["survey"]
        lines.append(f"| {name} | {x['texts']:,} | {x['tokens']:,} | {s_(f['median'])} ({s_(f['min'])}–"
                     f"{s_(f['max'])}, {f['n']}) | {s_(s['median'])} ({s_(s['min'])}–{s_(s['max'])}, {s['n']}) | "
                     f"{s['median'] / f['median']:.2f} x | {x['peak_rss_growth_mb']:.0f} MB |")
    lines += ["", "Views once the survey is loaded (SmolLM2 where measured, else MiniLM; the projection holds "
              f"{list(c.values())[-1]['points']:,} points):", "", "| view | median (min–max, n) |", "| --- | --- |"]
    views = list(c.values())[-1]["views"]
    lines += [f"| {name} | {ms(1e3 * v['median'])} ({ms(1e3 * v['min'])}–{ms(1e3 * v['max'])}, {v['n']}) |"
              for name, v in views.items()]
    return lines


def qk_lines(q: dict, ray: dict | None) -> list[str]:
    """Section 8: why this key against a forward pass; the corpus job on Ray against the same job here."""
    lines = ["", f"## 8. Why this key, and the corpus job on Ray ({q['model']})", "",
             "One score split into (query part, key part) pairs (attention.models.qk_attribution, from the result's "
             "hidden states and q, k, v: no pass for pre-norm models), and the same against the mean over every key "
             "the query sees (each key's parts through its own rotary), against the model's plain forward pass "
             "(sdpa) over the same text; medians (min–max, n) of the same run. Target: one pair ≤ 0.5 x.", "",
             "| tokens | layer (from 1) | forward pass | one pair | ratio | against the mean key | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for x in q["rows"]:
        f, p, m = x["forward"], x["pair"], x["mean"]
        lines.append(f"| {x['tokens']} | {x['layer'] + 1} | {ms(1e3 * f['median'])} ({ms(1e3 * f['min'])}–"
                     f"{ms(1e3 * f['max'])}, {f['n']}) | {ms(1e3 * p['median'])} ({ms(1e3 * p['min'])}–"
                     f"{ms(1e3 * p['max'])}, {p['n']}) | {p['median'] / f['median']:.2f} x | {ms(1e3 * m['median'])} "
                     f"({ms(1e3 * m['min'])}–{ms(1e3 * m['max'])}, {m['n']}) | {m['median'] / f['median']:.2f} x |")
    if ray is None:
        return lines + ["", "The corpus job on Ray: not measured (smoke)."]
    h, y = ray["here"], ray["ray"]
    return lines + ["", f"The corpus job over the default corpus ({ray['texts']} texts, MiniLM, saved after every "
                    f"25 texts): in this process {s_(h['median'])} ({s_(h['min'])}–{s_(h['max'])}, {h['n']}); on 2 "
                    f"local Ray workers, cluster start included, {s_(y['median'])} ({s_(y['min'])}–{s_(y['max'])}, "
                    f"{y['n']}): {y['median'] / h['median']:.2f} x. One 2-core machine is not where Ray pays: each "
                    "worker loads its own model and the two share the cores the in-process job already uses."]


def big_lines(big: dict) -> list[str]:
    """Section 9: the models researchers bring, on this CPU; the memory estimate's error."""
    lines = ["", "## 9. Models researchers bring (this CPU), and the memory estimate", "",
             "Each model in a child process of its own, loaded as `load_model` loads it (the memory plan first), "
             "then attend() on 512 tokens against the model's own forward pass (sdpa, nothing captured) with the same "
             "threads. Estimate: the plan's bytes for that input (weights, q, k, v and hidden states per token, the "
             "mask per pair; attention.models.forward.memory) ÷ the process's measured peak RSS growth from before "
             "the load. Targets: estimate ÷ measured between 1 and 2 (never under: an estimate under the peak is "
             "an out-of-memory kill let through).", "",
             "| model | dtype | load | weights | peak RSS growth | ÷ weights | estimate | estimate ÷ measured | "
             "attend() | its own forward | ratio | token limit here |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in big["rows"]:
        a, p = x["attend"], x["plain"]
        lines.append(f"| {x['model']} | {x['dtype']} | {s_(x['load_s'])} | {x['weights_gb']:.2f} GB | "
                     f"{x['peak_gb']:.2f} GB | {x['peak_gb'] / x['weights_gb']:.2f} | {x['estimate_gb']:.2f} GB | "
                     f"{x['estimate_gb'] / x['peak_gb']:.2f} | {s_(a['median'])} ({s_(a['min'])}–{s_(a['max'])}) | "
                     f"{s_(p['median'])} | {a['median'] / p['median']:.2f} x | {x['token_limit']:,} |")
    return lines


def gpu_lines(g: dict) -> list[str]:
    """Section 10: long inputs on a GPU (benchmarks.gpu), measured here or recorded on the device machine, beside
    what the design before issue 47 gave on the same kind of card (benchmarks/gpu_h100_before.json)."""
    where = (f"Recorded on {g['device']} (torch {g['torch']}) by `python -m benchmarks.gpu`, this machine having no "
             "CUDA device; the file is benchmarks/gpu_h100.json. SmolLM2 there has random weights of its shape "
             "(the bundled files do not travel to that machine): the arithmetic is the same."
             if g.get("recorded") else f"Measured in this run on {g['device']} (torch {g['torch']}).")
    before_file = ROOT / "benchmarks" / "gpu_h100_before.json"
    before = {(x["model"], x["n"]): x for x in json.loads(before_file.read_text())["rows"] if "error" not in x}
    lines = ["", "## 10. Long inputs on a GPU", "", where, "",
             "attend() (capture: the model's own fused kernel, q, k, v and the hidden states kept on the GPU in its "
             "dtype), the grid on screen (the survey, every head's weights recomputed from q and k there: for 16-bit "
             "q and k two fused Triton passes per layer, attention.models.forward.fused_survey; then the figure's "
             "JSON), the views after it (a head's zoom, the mean over heads, a query's "
             "row, attention by distance), the model's own forward pass (sdpa, nothing captured, the next token's "
             "logits only), peak GPU memory above the weights, and what the result keeps in the process's memory "
             "(the survey included); medians (min–max) of 3 after a warm-up, the device synchronised. \"before\" is "
             "the design before issue 47 (q, k, v copied to RAM as float32; benchmarks/gpu_h100_before.json), on "
             "the same kind of card." + (f" {g['note']}" if g.get("note") else ""), "",
             "| model | dtype | tokens | attend() | attend() ÷ own (before) | grid on screen (before) | "
             "zoom / mean / row / distance | own forward | peak GPU, attend() | kept in RAM (before) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in g["rows"]:
        if "error" in x:
            lines.append(f"| {x['model']} | | {x['n']:,} | failed: {x['error'][:80]} | | | | | | |")
            continue
        a, o, gr, b = x["attend"], x["own"], x["grid"], before.get((x["model"], x["n"]))
        ratio_was = f" ({b['attend_over_own']:.1f} x)" if b else ""
        grid_was = f" ({s_(b['grid']['median'])})" if b else ""
        ram_was = f" ({b['stored_gb']:.1f} GB)" if b else ""
        views = " / ".join(ms(x["views"][k]["median"] * 1000) for k in ("zoom", "mean", "row", "distance")) \
            if "views" in x else ""
        lines.append(
            f"| {x['model']} | {x['dtype']} | {x['n']:,} | {s_(a['median'])} ({s_(a['min'])}–{s_(a['max'])}) | "
            f"{x['attend_over_own']:.1f} x{ratio_was} | {s_(gr['median'])}{grid_was} | {views} | {s_(o['median'])} | "
            f"{x['attend_peak_gb']:.1f} GB | {x.get('host_gb', x['stored_gb']):.2f} GB{ram_was} |")
    if not g["rows"]:
        lines.append("| no CUDA device | | | | | | | | | |")
    return lines


def gpu_targets(g: dict) -> list[str]:
    """The GPU's targets (issue 47) as rows of the targets table, from section 10's rows."""
    where = "recorded on " + g["device"] if g.get("recorded") else "on " + str(g["device"])
    out = []
    for x in g["rows"]:
        if "error" in x:
            continue
        out.append(f"| {where}: {x['model']} ({x['dtype']}), {x['n']:,} tokens → attend(), vs its own forward pass | "
                   f"<= 1.5 x | {x['attend_over_own']:.2f} x ({s_(x['attend']['median'])} vs "
                   f"{s_(x['own']['median'])}) | {'yes' if x['attend_over_own'] <= 1.5 else '**no**'} |")
        if x["n"] == 32768:
            out.append(f"| {where}: the grid on screen at 32,768 tokens | <= 1 s | {s_(x['grid']['median'])} | "
                       f"{'yes' if x['grid']['median'] <= 1 else '**no**'} |")
            ram = x.get("host_gb", x["stored_gb"])  # the design before issue 47 kept everything there
            out.append(f"| {where}: a 32,768-token result's memory in RAM | <= 1 GB | {ram:.2f} GB | "
                       f"{'yes' if ram <= 1 else '**no**'} |")
    return out


def fig(d: dict) -> str:
    """A timing as the report gives it: median (p95, min–max, n)."""
    return f"{ms(d['median'])} (p95 {ms(d['p95'])}, {ms(d['min'])}–{ms(d['max'])}, n={d['n']})"


def fig_n(d: dict) -> str:
    """A count as the report gives it: median (min–max, n)."""
    return f"median {d['median']:.0f} ({d['min']:.0f}–{d['max']:.0f}, n={d['n']})"


def header_lines(smoke: bool) -> list[str]:
    """The title, the machine and versions, and the start of the targets' table."""
    return [
        "# Benchmarks" + (" (smoke run: smallest sizes only)" if smoke else ""),
        "",
        f"Written by `make bench` (`python -m benchmarks.run`) on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
        "Medians, with min–max; every figure below comes from this one run.",
        "",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}",
        "- Commands: `make bench` = `.venv/bin/python -m benchmarks.run`; the browser figures drive Debian's "
        "Chromium (headless, Playwright) against `streamlit run app.py` on 127.0.0.1, as `make run` starts it.",
        "",
        "## Targets",
        "",
        "| figure | target | measured | met | where missed: the floor, measured, and why |",
        "| --- | --- | --- | --- | --- |",
    ]


def target_lines(r: dict, smoke: bool) -> list[str]:
    """Each target's row: the figure measured in this run, and whether it is met (TARGETS; the GPU's too)."""
    b, m = r["browser"], r["models"]
    lines = []
    views = b["views"]
    measured = {
        "live_frames": f"{b['live']['frames']['median']:.0f} (min {b['live']['frames']['min']:.0f})",
        "live_latency": ms(b["live"]["latency"]["median"]) + f" (p95 {ms(b['live']['latency']['p95'])})",
        "live_messages": f"{b['live']['messages']}",
        "live_release": ms(b["live"]["release"]["median"]) + f" (st.slider step before: {PREVIOUS_SLIDER_MS} ms)",
        "live_payload": f"{r['live_payload'] / 1000:.0f} KB",
        "sentence16": ms(b["sentence16"]["median"]),
        "sentence512": ms(b["sentence512"]["median"]) if "sentence512" in b else None,
        "sentence16_floor": f"{_over_floor(r, 16):.1f} x ({ms(b['sentence16']['median'])} vs "
                            f"{ms(b['floor16']['median'])})",
        "sentence512_floor": f"{_over_floor(r, 512):.1f} x ({ms(b['sentence512']['median'])} vs "
                             f"{ms(b['floor512']['median'])})" if "floor512" in b else None,
        "smollm2_2048": None if smoke else f"{_over_plain(r, 2048):.2f} x ({s_(b['smollm2_2048']['median'] / 1000)} "
                        f"vs {s_(_long(r, 'smollm2', 2048)['plain']['median'])})",
        "smollm2_4096": None if smoke else f"{_over_plain(r, 4096):.2f} x ({s_(b['smollm2_4096']['median'] / 1000)} "
                        f"vs {s_(_long(r, 'smollm2', 4096)['plain']['median'])})",
        "views": None if smoke else f"slowest median {ms(max(v['median'] for v in views.values()))}",
        "result512": f"{_long(r, 'minilm', 512)['stored_mb']:.1f} MB "
                     f"(1/{PREVIOUS_RESULT_MB / _long(r, 'minilm', 512)['stored_mb']:.0f} of {PREVIOUS_RESULT_MB} MB)",
        "scan": s_(r["effects"]["scan"]["median"]), "patching": s_(r["effects"]["patching"]["median"]),
        "generate32": s_(r["effects"]["generate32"]["median"]),
        "roles": f"{_times(r, 'roles', 'probe_forward'):.1f} x ({s_(r['effects']['roles']['median'])})",
        "residual_patching": f"{_times(r, 'residual_patching', 'scan'):.1f} x "
                             f"({s_(r['effects']['residual_patching']['median'])})",
        "kernel_layer": f"{_times(r, 'kernel_layer', 'sdpa_layer'):.2f} x "
                        f"({ms(r['effects']['kernel_layer']['median'] * 1000)} vs "
                        f"{ms(r['effects']['sdpa_layer']['median'] * 1000)})",
        "lens": f"{_times(r, 'lens', 'unembed_lens_vectors'):.2f} x ({s_(r['effects']['lens']['median'])})",
        "grid_during_scan": None if smoke else f"{_during_scan(r):.2f} x "
                            f"({ms(b['grid_during_scan']['during']['median'])} vs "
                            f"{ms(b['grid_during_scan']['alone']['median'])})",
        "payload128": f"1/{1 / _ratio(r, 128):.0f}" if not smoke and "bertviz_bytes" in _row(r, 128) else None,
        "payload512": mb(_grid(r, 512)) if not smoke else None,
        "minilm_load": s_(_median(m["minilm_load"])),
        "smollm2_cached": s_(_median(m["smollm2_cached"])) if m["smollm2_cached"] else None,
        "rss": f"{b['server_memory']['VmHWM']:.0f} MB",
    }
    names = {"live_frames": "live slider, 1-s drag: frames in which the weights changed (lookup page)",
             "live_latency": "live slider: input event → painted", "live_messages": "websocket messages sent during "
             "a drag", "live_release": "release → server tables updated", "live_payload": "precomputed data, lookup "
             "page (sweeps + 101 × 101 plane)", "sentence16": "sentence (16 tokens) → grid, warm",
             "sentence512": "512-token sentence → grid (MiniLM)",
             "sentence16_floor": "sentence (16 tokens) → grid, vs the same text → idle on a trivial page "
                                 "(benchmarks/trivial_app.py: one text box, one line; Streamlit's own loop)",
             "sentence512_floor": "512-token sentence → grid, vs the same text → idle on the trivial page",
             "smollm2_2048": "SmolLM2, 2,048 tokens → grid on screen, vs transformers' own forward pass",
             "smollm2_4096": "SmolLM2, 4,096 tokens → grid on screen, vs transformers' own forward pass",
             "views": "every view of the 4,096-token text after its first load",
             "result512": "cached result at 512 tokens (MiniLM)", "payload128": "grid payload at 128 tokens vs BertViz",
             "scan": "exact scan, all 270 SmolLM2 heads, Mary/John prompt",
             "patching": "attribution patching, all heads",
             "generate32": "generating 32 tokens with capture (SmolLM2)",
             "roles": "head roles, all 270 heads, vs a forward pass on the probe",
             "residual_patching": "residual patching (31 x 14 sites) vs the exact scan",
             "kernel_layer": "our kernel on one SmolLM2 layer of 2,048 tokens (weights, output, survey sums; every "
                             "core) vs SDPA's (output only; benchmarks/NOTES.md: the floor)",
             "lens": "logit lens (31 layers x 14 positions) vs the LM head on the same 434 vectors",
             "grid_during_scan": "another user's 16-token SmolLM2 grid while a scan runs",
             "payload512": "grid payload at 512 tokens", "minilm_load": "minilm load",
             "smollm2_cached": "smollm2 cached load",
             "rss": "peak RSS, app server, both models, SmolLM2 up to 4,096 tokens"}
    for key, (target, check) in TARGETS.items():
        value = measured[key]
        met = "–" if value is None else ("yes" if check(r) else "**no**")
        floor = _floor(key, r) if met == "**no**" else ""
        lines.append(f"| {names[key]} | {target} | {value or 'not measured (smoke)'} | {met} | {floor} |")
    if "path" in r:  # each step on the learner's path (benchmarks/path_steps.py)
        for step, d in r["path"].items():
            target = path_steps.FIRST_PAGE_S if step == "first_page" else path_steps.WARM_S
            met = d["median"] <= target
            lines.append(f"| a step on the learner's path: {step} | <= {target:g} s | {d['median']:.2f} s "
                         f"({d['min']:.2f}–{d['max']:.2f}) | {'yes' if met else '**no**'} | "
                         f"{'' if met else PATH_FLOORS.get(step, 'section: Each step on the learner’s path')} |")
    lines += [line + "  |" for line in gpu_targets(r["gpu"])]  # (the GPU's rows: recorded there, no floor here)
    return lines


# Where a row misses its target: what bounds it, with this run's own figures where the run measures the floor, and
# the measurement in benchmarks/NOTES.md (its section named) where it does not.
PATH_FLOORS = {
    "first_page": "a fresh process imports Streamlit, torch and transformers before the first page (~4 s on 2 cores: "
                  "NOTES, 'What remains')",
    "generate": "16 steps of SmolLM2, one token each with its attention captured (~0.1 s a step): the page's "
                "progress bar moves from the first token on",
}


def _floor(key: str, r: dict) -> str:
    b, e = r["browser"], r["effects"]
    trivial = b["floor16"]["median"]
    elements = b.get("elements16", {}).get("median")
    kernel = _times(r, "kernel_layer", "sdpa_layer")
    floors = {
        "live_release": f"Streamlit's rerun of the slider's fragment: the trivial page's round trip is {ms(trivial)}; "
                        "the release redraws two tables and two charts (NOTES, 'Live sliders')",
        "sentence16_floor": (f"a page of Model heads' elements with no model: {ms(elements)} "
                             f"({elements / trivial:.1f} x the trivial page) in this run; the model's pass ~14 ms; "
                             "the rest React drawing ~40 elements and three canvases (NOTES, 'A new sentence reruns "
                             "only what it changes')")
        if elements else "",
        "sentence512_floor": "MiniLM's pass over 512 tokens and the 512-token views (section 5); the trivial page "
                             "types the same text",
        "sentence512": "MiniLM's pass over 512 tokens with the survey (section 5) and drawing three canvases",
        "smollm2_2048": f"our kernel's layer is {kernel:.2f} x SDPA's in this run; its two matmuls alone take as "
                        "long as SDPA's whole layer (NOTES, 'A fused kernel: the candidates measured')",
        "smollm2_4096": f"as at 2,048 tokens: our kernel's layer {kernel:.2f} x SDPA's (NOTES, 'A fused kernel')",
        "kernel_layer": "the two matmuls alone, chunked as the kernel chunks them, take as long as SDPA's whole "
                        "layer (46.4 vs 46.3 ms); softmax and the sums add >= 25 % (NOTES, 'A fused kernel')",
        "views": "the 4,096-token result's views are block maxima of 256 x 256 cells each; Head atlas recomputes "
                 "its statistics (NOTES, 'Long inputs and the server's memory')",
        "scan": f"270 ablated passes from the ablated layer up: ~140 forward passes' worth at 16 tokens "
                f"(a forward pass on the probe: {s_(e['probe_forward']['median'])})",
        "patching": "one forward and one backward pass over the prompt with every hook_z kept (run_with_cache's "
                    "gradients), and the model's lock",
        "grid_during_scan": "the browser's share of the VM's 2 cores while the scan's batches run (NOTES, 'Fair "
                            "sharing')",
        "sentence16": "",
    }
    return floors.get(key, "")


def section_lines(r: dict) -> list[str]:
    """Sections 1 to 4: the core trace, the models, the payload, the browser (and a class)."""
    core = "\n".join(
        f"| {row['n']} | {us(row['ours'])} | {us(row['torch'])} | "
        f"{row['ours']['median'] / row['torch']['median']:.1f}× |" for row in r["core"])
    m = r["models"]
    att = "\n".join(f"| {k.replace('@', ' @ ')} tokens | {ms(v['median'] * 1000)} ({ms(v['min'] * 1000)}–"
                    f"{ms(v['max'] * 1000)}) |" for k, v in m["attend"].items())
    pay = "\n".join(
        f"| {row['n']} | {mb(row['grid_bytes'])} | " + (
            f"{mb(row['bertviz_bytes'])} ({row['bertviz_seconds']:.1f} s to build, {row['bertviz_rss_mb']:.0f} MB "
            f"peak RSS) | 1/{row['bertviz_bytes'] / row['grid_bytes']:.0f} |" if "bertviz_bytes" in row
            else "not installed | – |") for row in r["payload"])
    b = r["browser"]
    ws = b.get("ws_bytes", {})
    ws_rows = "\n".join(f"| {n} | {mb(v)} |" for n, v in ws.items()) or "| (smoke run: skipped) | |"
    lines = []
    lines += [
        "",
        "## 1. Core: `scaled_dot_product_attention` trace vs torch's fused kernel (d = 64)",
        "",
        "Ours is numpy float64 and keeps every step (scores, scaled, weights, output); torch's "
        "`F.scaled_dot_product_attention` (float32) returns only the output.",
        "",
        "| n | ours | torch SDPA | ratio |",
        "| --- | --- | --- | --- |",
        core,
        "",
        "## 2. Models",
        "",
        f"- minilm load (fresh process, transformers already imported): {s_(_median(m['minilm_load']))} "
        f"(runs: {', '.join(s_(x) for x in m['minilm_load'])}); importing transformers first costs "
        f"{s_(_median(m['import']))} once per process.",
        f"- smollm2 first load (GGUF → float32 conversion into an empty cache): "
        f"{s_(m['smollm2_first']) if m['smollm2_first'] else 'not measured (smoke)'}",
        f"- smollm2 cached load: {', '.join(s_(x) for x in m['smollm2_cached']) or 'not measured (smoke)'}",
        f"- peak RSS of a Python process with both models loaded and run (512 and 256 tokens): "
        f"{m['both_rss']:.0f} MB" if m["both_rss"] else "- peak RSS with both models: not measured (smoke)",
        "",
        "| `attend()` | median (min–max) |",
        "| --- | --- |",
        att,
        "",
        "## 3. Payload: the all-heads grid vs BertViz `model_view` (MiniLM, same sentence)",
        "",
        "Ours: the Plotly JSON of the grid figure (one pooled heatmap, float32 base64). BertViz: the HTML "
        "`model_view(..., html_action='return')` produces (every weight as decimal text; it also needs a CDN).",
        "",
        "| tokens | our grid | BertViz model_view | ours / BertViz |",
        "| --- | --- | --- | --- |",
        pay,
        "",
        "Everything the server sends over the websocket to draw the whole Model heads page (grid, zoom, token "
        "focus, widgets), measured in Chromium:",
        "",
        "| tokens | websocket bytes |",
        "| --- | --- |",
        ws_rows,
        "",
        "## 4. Browser (Chromium, headless)",
        "",
        f"- cold start (`streamlit run` → first chart visible on the lookup page): {fig(b['cold_start'])}",
        f"- live slider, 1-s scripted drag (60 pointer moves): frames with new weights {fig_n(b['live']['frames'])}; "
        f"input event → painted {fig(b['live']['latency'])}; websocket messages sent during a drag: "
        f"{b['live']['messages']}; release → server tables updated {fig(b['live']['release'])}. Before this "
        f"round the lookup page used st.slider: {PREVIOUS_SLIDER_MS} ms per step (median, previous run), and a "
        "drag changed the chart 0 times before release.",
        f"- sentence submitted → all-heads grid painted, 16 tokens, warm: {fig(b['sentence16'])}",
    ]
    lines.append(f"- the same 16-token texts on a trivial page (benchmarks/trivial_app.py), submitted → idle: "
                 f"{fig(b['floor16'])}")
    if "elements16" in b:
        lines.append(f"- the same texts on a page of Model heads' size with no model (benchmarks/elements_app.py: "
                     f"the app's sidebar of pages and Model heads' {sum(ELEMENTS.values())} elements), submitted → "
                     f"idle: {fig(b['elements16'])}, {b['elements16']['median'] / b['floor16']['median']:.1f} x the "
                     f"trivial page; Model heads is {b['sentence16']['median'] / b['elements16']['median']:.1f} x it")
    if "sentence512" in b:
        lines.append(f"- sentence submitted → all-heads grid painted, 512 tokens: {fig(b['sentence512'])}")
        lines.append(f"- the same 512-token texts on the trivial page, submitted → idle: {fig(b['floor512'])}")
    for n in LONG:
        if f"smollm2_{n}" in b:
            lines.append(f"- SmolLM2, {n:,}-token text submitted → all-heads grid painted (forward pass, survey of "
                         f"every head, page): {fig(b[f'smollm2_{n}'])}")
    lines.append(f"- server memory after the run: RSS {b['server_memory']['VmRSS']:.0f} MB, "
                 f"peak {b['server_memory']['VmHWM']:.0f} MB")
    lines += class_lines(b)
    return lines


def long_lines(r: dict, smoke: bool) -> list[str]:
    """Section 5: long inputs, and the views of the long text once loaded."""
    views = r["browser"]["views"]
    lines = []
    lines += ["", "## 5. Long inputs", "",
              "Stored per result: q, k, v and the hidden states (they grow as n); weights are recomputed from q and k "
              "a chunk of rows at a time. One child process per model with the server's malloc settings. \"attend()\" "
              "is the forward pass with our attention kernel, which makes each layer's output from weights it takes "
              "a chunk of query rows at a time and sums the survey behind the grid, the Head atlas and attention by "
              "distance from the same weights; \"survey\" is what a view then waits for it (a lookup). "
              "\"transformers\" is the model's own forward pass (fused SDPA attention, nothing captured) on as many "
              "tokens with the same torch threads: the floor (median of 3 after a warm-up pass).",
              "", "| model | tokens | attend() | survey | transformers | attend() ÷ transformers | stored | "
              "its weights would be | peak RSS (process) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {x['model']} | {x['n']:,} | {s_(x['forward'])} | {s_(x['survey'])} | {s_(x['plain']['median'])} | "
              f"{x['forward'] / x['plain']['median']:.2f} | {x['stored_mb']:.1f} MB | "
              f"{x['weights_mb']:,.0f} MB | {x['peak_rss_mb']:.0f} MB |" for x in r["long"]]
    lines += ["", f"Views of the {'16' if smoke else '4,096'}-token text once loaded (a click in the page → the view "
              "painted; the text follows from page to page):", "", "| view | median (min–max, n) |", "| --- | --- |"]
    lines += [f"| {name} | {fig(v)} |" for name, v in views.items()]
    lines += ["", "On a GPU (`ATTENTION_EXPLORER_DEVICE=cuda`): section 10."]
    return lines


def effects_lines(r: dict) -> list[str]:
    """Section 6: predictions and head effects (SmolLM2), and a grid beside a running scan."""
    b = r["browser"]
    lines = []
    e = r["effects"]
    lines += ["", "## 6. Predictions and head effects (SmolLM2, a child process with the server's malloc settings)", "",
              f"Mary/John prompt ({e['tokens']} tokens), target “ Mary”, foil “ John”: baseline logit difference "
              f"{e['baseline']:.2f}.", "",
              f"- exact scan of all {e['heads']} heads (zero ablation, batched, each copy starting at its ablated "
              f"layer): {s_(e['scan']['median'])} ({s_(e['scan']['min'])}–{s_(e['scan']['max'])}, n={e['scan']['n']})",
              f"- attribution patching, every head (one forward, one backward): {s_(e['patching']['median'])}; "
              f"Spearman rank correlation with the exact scan {e['spearman']:.2f}",
              f"- generating 32 tokens with the KV cache, capturing every step's rows: {s_(e['generate32']['median'])}",
              "", "What heads do, each against a pass of the same run (medians):", "",
              f"- head roles of every head on the induction probe: {s_(e['roles']['median'])}, "
              f"{_times(r, 'roles', 'probe_forward'):.1f} x one forward pass over the probe "
              f"({s_(e['probe_forward']['median'])})",
              f"- activation patching of every residual site (layers x positions, names swapped): "
              f"{s_(e['residual_patching']['median'])}, {_times(r, 'residual_patching', 'scan'):.1f} x the exact "
              "ablation scan",
              f"- direct logit attribution: {s_(e['attribution']['median'])}; the logit lens (every layer, every "
              f"position): {s_(e['lens']['median'])}, {_times(r, 'lens', 'unembed_lens_vectors'):.2f} x the LM head "
              f"alone on the same vectors ({s_(e['unembed_lens_vectors']['median'])}; a forward pass computing the "
              f"logits at every position: {s_(e['forward_all_logits']['median'])})"]
    if "grid_during_scan" in b:
        g = b["grid_during_scan"]
        lines.append(f"- in Chromium, another session's 16-token SmolLM2 sentence → grid while a scan runs (a short "
                     f"request goes before the scan's next batch, and the scan waits 1 s after it while that page "
                     f"draws: running.ModelLock): {fig(g['during'])}; the same "
                     f"page's grid with no scan running: {fig(g['alone'])}; {_during_scan(r):.2f} x. The scan, from "
                     f"its click to its page idle, took {g['scan_s']:.1f} s meanwhile.")
    return lines


def report(r: dict, smoke: bool) -> str:
    """docs/benchmarks.md from one run's figures."""
    lines = header_lines(smoke) + target_lines(r, smoke) + section_lines(r) + long_lines(r, smoke)
    lines += effects_lines(r)
    lines += corpus_lines(r["corpus"])
    lines += qk_lines(r["qk"], r.get("ray"))
    lines += big_lines(r["big"]) + gpu_lines(r["gpu"])
    if soak.RESULT.exists() and not smoke:  # make soak's last run (20 minutes: not part of make bench)
        lines += ["", *soak.lines(json.loads(soak.RESULT.read_text()))]
    if "comparison" in r:
        lines += ["", *compared.lines(r["comparison"])]
    if "images" in r:
        lines += ["", *image_bench.lines(r["images"])]
    if "slow" in r:
        lines += ["", *slow.section(r["slow"])]
    if "hooks" in r:
        lines += ["", *hook_bench.lines(r["hooks"])]
    if "path" in r:
        lines += ["", *path_steps.section(r["path"])]
    if "census" in r:
        lines += ["", *census_bench.lines(r["census"])]
    notes = ROOT / "benchmarks" / "NOTES.md"
    if notes.exists() and not smoke:
        lines += ["", notes.read_text().strip()]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    with_bertviz = importlib.util.find_spec("bertviz") is not None
    from attention.models import load_model

    tok = load_model("minilm").tokenizer
    if args.smoke:
        os.environ["BENCH_SMOKE"] = "1"  # no warm-up calls (common.timed), here and in the child jobs
    texts16 = [common.text_of_tokens(tok, 16, salt=f"w{i}") for i in range(2 if args.smoke else 7)]
    texts512 = [common.text_of_tokens(tok, 512, salt=f"w{i}") for i in range(5)]
    payload_texts = {n: common.text_of_tokens(tok, n, salt="payload") for n in (16, 128, 512)}
    long_texts, scan_prompts, smollm2_texts16 = {}, [], []
    if not args.smoke:
        smollm2_tok = load_model("smollm2").tokenizer
        long_texts = {n: [common.text_of_tokens(smollm2_tok, n, salt=f"long{i}") for i in range(3 if n < 4096 else 2)]
                      for n in LONG}
        prompt = ex.PREDICTION_EXAMPLES["Mary and John"][0]
        scan_prompts = [prompt.replace("the store", place) for place in ("the store", "the market", "the park")]
        smollm2_texts16 = [common.text_of_tokens(smollm2_tok, 16, salt=f"scan{i}") for i in range(6)]
    class_texts = [[common.text_of_tokens(tok, 16, salt=f"class{k}.{i}") for i in range(bb.CLASS_SESSIONS)]
                   for k in range(bb.CLASS_ROUNDS)]
    browser = functools.partial(bb.run, args.smoke, texts16, texts512, payload_texts, long_texts, scan_prompts,
                                smollm2_texts16, class_texts)
    # A smoke run times nothing: its browser part runs beside the compute part (its waits on servers and pages
    # leave a core free), which takes `make test` ~40 s less. A real run keeps them apart, as measured.
    with concurrent.futures.ThreadPoolExecutor(1) as beside:
        pending = beside.submit(browser) if args.smoke else None
        r = {"core": compute.core((3,) if args.smoke else (3, 64, 512))}
        print("core done", file=sys.stderr)
        r["models"] = compute.models(args.smoke)
        print("models done", file=sys.stderr)
        r["payload"] = compute.payload(args.smoke, with_bertviz)
        print("payload done", file=sys.stderr)
        r["long"] = compute.long_inputs(args.smoke)
        print("long inputs done", file=sys.stderr)
        r["effects"] = compute.effects(args.smoke)
        r["live_payload"] = compute.live_payload()
        print("effects done", file=sys.stderr)
        r["corpus"] = compute.corpus(args.smoke)
        print("corpus done", file=sys.stderr)
        r["qk"], r["ray"] = compute.qk(args.smoke), compute.ray_corpus(args.smoke)
        print("qk and ray done", file=sys.stderr)
        r["big"], r["gpu"] = compute.big_models(args.smoke), compute.gpu(args.smoke)
        print("big models and GPU done", file=sys.stderr)
        r["comparison"] = compared.measure(args.smoke)
        print("comparison done", file=sys.stderr)
        r["images"] = image_bench.measure(args.smoke)
        print("images done", file=sys.stderr)
        r["browser"] = pending.result() if pending is not None else browser()
        if not args.smoke:  # fresh servers, ~10 minutes: not part of make test's smoke run
            r["slow"] = slow.measure(runs=3)
            print("slow operations done", file=sys.stderr)
            r["hooks"] = hook_bench.measure()  # batch_patching over 100 pairs, minutes: not in the smoke run
            print("hooks done", file=sys.stderr)
            r["path"] = path_steps.measure(runs=3)  # fresh servers and every path page: not in the smoke run
            print("path steps done", file=sys.stderr)
            r["census"] = census_bench.measure()  # SmolLM2 and Gemma 3: also writes docs/heads.md
            (ROOT / "docs" / "heads.md").write_text(census_bench.heads_md(r["census"]))
            print("census done", file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report(r, args.smoke))
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
