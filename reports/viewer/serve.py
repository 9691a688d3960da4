"""Serving the viewer with uvicorn: in the foreground (`compare view`) or on a thread beside a run
(`compare run --view`). Bound to loopback unless told otherwise; elsewhere behind a fresh token."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from .app import create_app
from .cache import DiskCache

DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Served:
    """A viewer being served: its address (with the token, when it needs one), and how to stop it."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread | None = None

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)


def _server(folders: list[Path], host: str, port: int) -> tuple[uvicorn.Server, str | None]:
    loopback = is_loopback(host)
    token = None if loopback else secrets.token_urlsafe(18)
    app = create_app(folders, token=token, loopback=loopback, cache=DiskCache(), prewarm=True)
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", log_level="warning", access_log=False, timeout_graceful_shutdown=1
    )
    return uvicorn.Server(config), token


def _address(server: uvicorn.Server, host: str, token: str | None) -> str:
    sockets = [s for srv in server.servers for s in srv.sockets]  # port 0: the one the system chose
    port = sockets[0].getsockname()[1] if sockets else server.config.port
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def serve(folders: list[Path], host: str, port: int, announce: Callable[[str], None]) -> None:
    """Serve until Ctrl-C; `announce` gets the address once the socket listens."""
    server, token = _server(folders, host, port)
    watcher = threading.Thread(target=_announce_when_started, args=(server, host, token, announce), daemon=True)
    watcher.start()
    server.run()


def _announce_when_started(
    server: uvicorn.Server, host: str, token: str | None, announce: Callable[[str], None]
) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        announce(_address(server, host, token))


def start_in_background(folders: list[Path], host: str = "127.0.0.1", port: int = 0) -> Served:
    """The viewer on a daemon thread (port 0: any free one), listening when this returns; off the main thread
    uvicorn leaves the signals alone, so Ctrl-C stays the run's."""
    server, token = _server(folders, host, port)
    thread = threading.Thread(target=server.run, name="viewer", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise OSError(f"the viewer could not listen on {host}:{port}")
        time.sleep(0.02)
    return Served(url=_address(server, host, token), server=server, thread=thread)
