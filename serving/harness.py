"""The harness that starts the app for tests, the benchmark and the screenshot script: a free port, a server's
address, waiting for its health check, stopping it (running_app)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from .process import app_environment, streamlit_command


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

