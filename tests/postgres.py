"""A real PostgreSQL server for the tests, started by the test itself from Debian's package (make postgres), as
serving.running_class starts Debian's nginx: no system service, no root needed, every file in one temporary
folder that is removed afterwards.

    with running_postgres() as url:  # postgresql+psycopg://attention@127.0.0.1:<port>/classroom
        engine = sqlalchemy.create_engine(url)

initdb and postgres refuse to run as root (CI runs as root): as root, the server's commands run as `nobody`
(subprocess's user=, as `setpriv` would), in a folder that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from pathlib import Path

from serving import free_port

POSTGRES_GLOB = "/usr/lib/postgresql/*/bin"  # Debian's package (make postgres); the highest version is used
USER = "attention"  # the superuser initdb creates (trust authentication: no password)
DATABASE = "classroom"
SERVER_USER = "nobody"  # who runs initdb and postgres when the tests run as root
START_TRIES = 3  # another process may take the free port before postgres binds it: then another port


class PostgresUrl(str):
    """The SQLAlchemy URL of a running server; `.port`, `.socket_dir` (its unix socket), `.data_dir`, `.log`."""

    port: int
    socket_dir: Path
    data_dir: Path
    log: Path


def postgres_bin() -> Path:
    """The bin folder of the highest PostgreSQL version installed by Debian's package; RuntimeError if none."""
    def version(folder: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", Path(folder).parent.name))

    found = [b for b in glob.glob(POSTGRES_GLOB) if (Path(b) / "initdb").exists() and (Path(b) / "pg_ctl").exists()]
    if not found:
        raise RuntimeError(f"PostgreSQL not found ({POSTGRES_GLOB}/initdb): install Debian's postgresql first "
                           "(make postgres)")
    return Path(max(found, key=version))


def _server_user() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as when we are root; None when we are not root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise RuntimeError(f"running as root, and there is no user {SERVER_USER!r} to run PostgreSQL as "
                           "(initdb and postgres refuse root)") from None


def _reachable(folder: Path, user: pwd.struct_passwd) -> bool:
    """Whether `user` can pass through every folder above `folder` (a server run as nobody must reach its data)."""
    for parent in folder.parents:
        st = parent.stat()
        if st.st_uid == user.pw_uid:
            bit = stat.S_IXUSR
        elif st.st_gid == user.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            return False
    return True


def _environment() -> dict:
    """This environment without PG* variables (PGHOST, PGDATA, PGOPTIONS... would redirect the commands) and in
    the C locale (a LANG whose locale is not installed makes initdb fail)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG") and not k.startswith("LC_")}
    env.update(LC_ALL="C", LANG="C")
    return env


@contextlib.contextmanager
def running_postgres(timeout: float = 60.0):
    """Yield the SQLAlchemy URL (a PostgresUrl) `postgresql+psycopg://attention@127.0.0.1:<port>/classroom` of a
    fresh PostgreSQL server: initdb in a temporary folder, postgres on a free port of 127.0.0.1 and a unix socket
    in that folder, fsync off, an empty database `classroom` owned by the superuser `attention` (trust, no
    password). Afterwards the server is stopped (immediate: nothing to keep) and the folder removed."""
    bin_dir = postgres_bin()
    user = _server_user()
    env = _environment()
    folder = Path(tempfile.mkdtemp(prefix="explorer-postgres-"))
    data, sockets, log = folder / "data", folder / "socket", folder / "postgres.log"

    def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}
        result = subprocess.run([str(bin_dir / cmd[0]), *cmd[1:]], cwd=folder, env=env, capture_output=True,
                                text=True, timeout=timeout + 30, **as_user)
        if check and result.returncode:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{cmd[0]} failed (exit {result.returncode}): {result.stdout[-1000:]}"
                               f"{result.stderr[-2000:]}{tail}")
        return result

    started = False
    try:
        sockets.mkdir()
        if user:
            if not _reachable(folder, user):
                raise RuntimeError(f"running as root, PostgreSQL runs as {SERVER_USER}, who cannot reach {folder}: "
                                   "set TMPDIR to a folder every user can pass through")
            for path in (folder, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
        run("initdb", "-D", str(data), "-A", "trust", "-U", USER, "-E", "UTF8", "--locale=C", "--no-sync")
        for attempt in range(START_TRIES):
            port = free_port()
            options = f"-k {sockets} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
            result = run("pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", str(int(timeout)), "-o", options,
                         "start", check=False)
            started = result.returncode == 0
            busy = log.exists() and "could not bind" in log.read_text(errors="replace")
            if started or not busy or attempt == START_TRIES - 1:
                break
            log.unlink()  # the port was taken meanwhile: try another
        if not started:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"postgres did not start (exit {result.returncode}): {result.stdout[-1000:]}"
                               f"{result.stderr[-1000:]}{tail}")
        run("createdb", "-h", str(sockets), "-p", str(port), "-U", USER, DATABASE)
        url = PostgresUrl(f"postgresql+psycopg://{USER}@127.0.0.1:{port}/{DATABASE}")
        url.port, url.socket_dir, url.data_dir, url.log = port, sockets, data, log
        yield url
    finally:
        if started:
            stopped = run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "-t", "30", "stop", check=False)
            if stopped.returncode:  # pg_ctl could not stop it: kill the postmaster (its children follow)
                with contextlib.suppress(OSError, ValueError, IndexError):
                    os.kill(int((data / "postmaster.pid").read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
