"""How a server process runs: where the app is, the command line that serves it, its environment, and the
process-wide settings app.py applies first thing (torch threads, OpenMP, malloc) and the model side warmed in
the background."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"  # beside this package, in the repository and when installed


# --- Process settings ----------------------------------------------------------------------------------
def torch_threads() -> int:
    """Torch threads per forward pass: $ATTENTION_EXPLORER_TORCH_THREADS, default 1.

    The server shares its cores between sessions (and, on a small machine, with the browser); two threads
    fighting for two busy cores made a 16-token sentence slower (benchmarks/NOTES.md). Raise it on a
    dedicated many-core server.
    """
    return int(os.environ.get("ATTENTION_EXPLORER_TORCH_THREADS", "1"))


def short_work_threads() -> None:
    """Give the calling thread the server's torch threads (torch_threads()). A new thread starts with the count
    of the last set_num_threads anywhere in the process: during a scan (every core) a page's Job thread then ran
    its short pass on two threads fighting the scan and the browser for two busy cores. No-op before torch
    is loaded."""
    torch = _torch_if_loading()
    if torch is not None:
        torch.set_num_threads(torch_threads())


def _torch_if_loading():
    """torch once any thread has begun importing it, else None. Not sys.modules["torch"] itself: while another
    session's thread is still importing torch (seconds, on a fresh server) that module is half made and has
    no set_num_threads yet, which failed the first pages of a class (issue 33); `import` waits for it."""
    if "torch" not in sys.modules:
        return None
    import torch

    return torch


OMP_WAIT_POLICY = "PASSIVE"  # OpenMP threads wait asleep, not spinning (configure_process says why)
MALLOC_ARENA_MAX = 2  # glibc arenas: Streamlit runs each rerun in a new thread, each thread would get one
MALLOC_MMAP_THRESHOLD = 1 << 20  # bytes: larger blocks are mmapped and handed back to the OS when freed


def malloc_environment() -> dict[str, str]:
    """The malloc settings as environment variables, for child processes (the benchmark's)."""
    return {"MALLOC_ARENA_MAX": str(MALLOC_ARENA_MAX), "MALLOC_MMAP_THRESHOLD_": str(MALLOC_MMAP_THRESHOLD)}


_configured = False


def configure_process() -> None:
    """Process-wide tuning for a server, once per process (app.py calls it on every run; later calls return).

    - torch threads (torch_threads()). Toy pages never import torch, so it is not imported here: before
      torch is loaded, OMP_NUM_THREADS sets its thread count; once loaded, set_num_threads does.
    - OpenMP threads that sleep when they wait (OMP_WAIT_POLICY, read when torch loads). Spinning ones took
      the cores they waited for from the other work on a busy machine: SmolLM2's exact scan (2 threads) ran
      17-19 s of CPU at load 4.5 against 5-6 s passive, where the newcomer saw it take 240 s while the machine
      ran other work (benchmarks/NOTES.md).
    - glibc malloc: few arenas, and a fixed mmap threshold, so that big freed arrays go back to the OS at
      once. glibc otherwise raises its threshold after the first large free and kept the transient arrays
      of 512-token forward passes: peak RSS 1.9 GB with both models, ~1.2 GB with a 1 MiB threshold
      (benchmarks/NOTES.md). Not 4 MiB: blocks under the threshold stay in the heap once freed, and a
      server that had read 4,096 tokens idled at 2.46 GB instead of 1.79 GB. Same as the environment
      variables of malloc_environment(). No-op without glibc.
    """
    global _configured
    if _configured:
        return
    _configured = True
    threads = torch_threads()
    os.environ["OMP_NUM_THREADS"] = str(threads)  # for a torch not imported yet
    os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
    torch = _torch_if_loading()
    if torch is not None:  # imported, or being imported by another session's thread: waited for
        torch.set_num_threads(threads)
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_arena_max, m_mmap_threshold = -8, -3  # <malloc.h>
    libc.mallopt(m_arena_max, MALLOC_ARENA_MAX)
    libc.mallopt(m_mmap_threshold, MALLOC_MMAP_THRESHOLD)


WARM_AFTER_S = 1.5  # seconds after a process's first page before the model side is imported (warm_model_side)
_warming: threading.Thread | None = None


def warm_model_side() -> None:
    """Import the model side (torch, transformers, attention.models: ~4 s on 2 cores) in the background, once per
    process, WARM_AFTER_S after the first page started: a visitor's first model page then does not wait for it
    (the first Predictions opened from Home, Positions' SmolLM2 head, the corpus page). A model page that comes
    first imports it itself; Python's import lock makes the two share one import. Off with
    ATTENTION_EXPLORER_WARM=0 (a server that only shows the toy pages keeps ~0.4 GB less)."""
    global _warming
    if _warming is not None or os.environ.get("ATTENTION_EXPLORER_WARM", "1") == "0":
        return
    _warming = threading.Thread(target=_warm, name="attention-explorer-warm", daemon=True)
    _warming.start()


def _warm() -> None:
    time.sleep(WARM_AFTER_S)  # the first page draws first
    try:  # torch takes its thread count from OMP_NUM_THREADS, which configure_process set
        import attention.models  # noqa: F401 - imported for its side effect: loaded modules stay loaded
    except Exception:  # noqa: BLE001 - a model page that imports it says what is wrong, in the page
        return



def streamlit_command(port: int = 8501, address: str = "127.0.0.1") -> list[str]:
    """The exact command line that serves the app: make run, the console command and the tests use it."""
    return [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
            "--server.address", address, "--server.port", str(port), "--browser.gatherUsageStats", "false",
            # Do not watch source files: a project folder holding .venv overflowed inotify's queue.
            "--server.fileWatcherType", "none",
            # No full gc.collect() after every script run: with torch and transformers loaded it takes
            # ~0.3-0.5 s holding the GIL, so the next click waited for it (512 tokens -> grid: 1.19 s ->
            # 0.77 s). Long texts collect once before they are computed (pages/_jobs.py).
            "--runner.postScriptGC", "false",
            # Widgets on model pages take a default carried from the last page and may also be set by a
            # button's callback (an example, a model switch): intended, so no log warning about it.
            "--global.disableWidgetStateDuplicationWarning", "true",
            # A served app: visitors get the viewer's menu, not the developer's Deploy button and options.
            "--client.toolbarMode", "viewer",
            # No traceback or server path ever reaches a visitor: the pages report a failure in words with a
            # reference (pages/_failure.py); this keeps Streamlit's own fallback box free of details too.
            "--client.showErrorDetails", "none"]


def app_environment(extra: dict | None = None) -> dict:
    """The environment the app runs in: offline unless the caller set HF_HUB_OFFLINE itself."""
    env = dict(os.environ, **(extra or {}))
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env

