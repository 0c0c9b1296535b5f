"""A class on one machine: app processes behind nginx, one address, each browser kept on its process
(`attention-explorer class`, `make class`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .harness import ServerUrl, free_port, healthy, running_app, stop

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

