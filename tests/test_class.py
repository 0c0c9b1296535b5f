"""A class on one machine: app processes behind Debian's nginx (serving.running_class, `make class`).

Checked over HTTP and a websocket, without a browser: a new browser is sent to the process with the
fewest connections and told which one by a cookie; every later request carrying it, the websocket
included, reaches that process (a Streamlit session lives in one process's memory); a cookie naming
anything else is not followed; when a process dies, its browsers reach another, and once started again
(`url.revive()`, as `attention-explorer class` does) a cookie naming it reaches it again (make soak kills one under
load, with browsers watching). The load test, one process against several, is in `make bench`.
"""

import asyncio
import os
import signal
import time
import urllib.request
from http.cookies import SimpleCookie

import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

import serving
from serving import running_class

pytestmark = pytest.mark.slow


def backend_of(url: str, cookie: str | None = None) -> str:
    """GET `url` (with the cookie explorer_backend=`cookie`) -> the process nginx names in its answer."""
    request = urllib.request.Request(url, headers={"Cookie": f"explorer_backend={cookie}"} if cookie else {})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert b"<html" in response.read().lower()  # the app's page came through
        jar = SimpleCookie(response.headers["Set-Cookie"])
    return jar["explorer_backend"].value


async def open_session_socket(url: str, cookie: str) -> None:
    """Open the app's websocket through nginx as the browser does (with its cookie), then close it."""
    request = HTTPRequest(url.replace("http://", "ws://") + "/_stcore/stream",
                          headers={"Cookie": f"explorer_backend={cookie}", "Origin": url})
    socket = await websocket_connect(request, subprotocols=["streamlit"])
    socket.close()


def test_browsers_are_spread_over_the_processes_each_stays_on_its_own_and_moves_when_it_dies_and_back():
    with running_class(2) as url:
        assert sorted(url.backends) == sorted(set(url.backends)) and len(url.backends) == 2
        first, second = backend_of(url + "/"), backend_of(url + "/")
        assert {first, second} == set(url.backends)  # two new browsers, two processes
        for backend in url.backends:
            assert {backend_of(url + "/model_heads", backend) for _ in range(4)} == {backend}
            asyncio.run(open_session_socket(url, backend))  # websockets are proxied, to the cookie's process
        assert backend_of(url + "/", "evil.example:80") in url.backends  # not followed: a process of ours
        # A process killed: its browsers reach the other one, and the cookie then names that one.
        dead, alive = url.backends
        killed = url.pids[0]
        os.kill(killed, signal.SIGKILL)
        os.waitpid(killed, 0)
        assert backend_of(url + "/model_heads", dead) == alive
        asyncio.run(open_session_socket(url, dead))  # the reconnecting websocket too
        assert {backend_of(url + "/") for _ in range(3)} == {alive}  # new browsers: only the live one
        # `attention-explorer class` starts it again, on its port; nginx tries it again after its fail_timeout.
        assert url.revive() == [dead] and url.revive() == []
        assert url.pids[0] != killed and os.path.exists(f"/proc/{url.pids[0]}")
        deadline = time.monotonic() + 30
        while backend_of(url + "/model_heads", dead) != dead:  # its browsers are its again
            assert time.monotonic() < deadline, "nginx never sent the revived process's browsers back to it"
            time.sleep(1)


def test_a_missing_nginx_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(serving.classroom, "NGINX", "/nonexistent/nginx")
    with pytest.raises(RuntimeError, match="make nginx"), running_class(2):
        pass
