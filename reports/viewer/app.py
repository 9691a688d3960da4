"""The viewer's web app (Starlette): pages and JSON over the run directories under its folders, read-only.

    /                                 the runs list          /api/runs
    /runs/KEY                         a run's overview       /api/runs/KEY/overview, /api/runs/KEY/live (events)
    /runs/KEY/tasks/TASK              a task's units         /api/runs/KEY/tasks/TASK, /api/runs/KEY/diff/TASK?a=&b=
    /runs/KEY/report.html             the run's report.html, as `compare report` wrote it

Only GET and HEAD are answered. Bound to loopback, a request must name a loopback host (a web page elsewhere
cannot reach it through DNS rebinding); bound elsewhere, every request needs the token printed at start
(`?token=` once, then a cookie). Pages are plain HTML and JavaScript that insert run text with `textContent`.
Read runs and overviews are cached until their files change (`cache.py`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import suppress
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ...core.conversations import StoreError
from ...core.runlog import RunLog, RunLogError, read_manifest, read_records, read_run
from ..html import CSP as REPORT_CSP
from ..runs import ReportError
from .cache import DiskCache, RunCache
from .catalog import RunEntry, describe, find_runs
from .live import LiveRun
from .overview import overview
from .task import diff, task_page

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]

LOOPBACK_NAMES = {"127.0.0.1", "localhost", "::1", "testserver"}  # testserver: Starlette's test client
PAGE_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
LIVE_POLL_S = 0.5  # how often a live page's files are looked at
HEARTBEAT_S = 15.0  # a comment line keeps an idle event stream open through proxies
CATALOG_TTL_S = 2.0  # the runs under the folders are searched again after this long


class Viewer:
    """What the routes read: the runs under `folders`, their overviews, their tasks' records and live state."""

    def __init__(self, folders: list[Path], disk: DiskCache | None = None) -> None:
        self.folders = [Path(folder) for folder in folders]
        # The run log is read for its overview and let go: a task page reads its own task's records.
        self.overviews: RunCache[dict[str, Any]] = RunCache(lambda path: overview(read_run(path)), disk=disk)
        self.live: dict[Path, LiveRun] = {}
        self._catalog: tuple[float, list[RunEntry]] | None = None
        self._lock = threading.Lock()

    def entries(self) -> list[RunEntry]:
        with self._lock:
            if self._catalog is None or time.monotonic() - self._catalog[0] > CATALOG_TTL_S:
                self._catalog = (time.monotonic(), find_runs(self.folders))
            return self._catalog[1]

    def entry(self, key: str) -> RunEntry:
        for entry in self.entries():
            if entry.key == key:
                return entry
        with self._lock:
            self._catalog = None  # a run made since the last search
        for entry in self.entries():
            if entry.key == key:
                return entry
        raise LookupError(f"no run {key!r} under {', '.join(str(f) for f in self.folders)}")

    def task_run(self, key: str, task_id: str) -> RunLog:
        """The run log as far as one task's page needs it: that task's records (not the whole run's)."""
        path = self.entry(key).path
        records, warnings = read_records(path, task_id)
        return RunLog(run_dir=path, manifest=read_manifest(path), records=records, warnings=warnings)

    def prewarm(self) -> None:
        """Compute every run's overview, newest first, before anyone asks (on a thread of its own)."""
        for entry in self.entries():
            with suppress(ReportError, RunLogError, StoreError, OSError):
                self.overviews.get(entry.path)

    def live_run(self, key: str) -> LiveRun:
        path = self.entry(key).path
        with self._lock:
            return self.live.setdefault(path, LiveRun(path))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _guarded(body: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """A route whose failures are JSON errors naming what is wrong: 404 for what is not there, 422 for a run
    the suite cannot read."""

    def route(request: Request) -> Response:
        try:
            return body(request)
        except LookupError as missing:  # TaskNotFound and UnitNotFound too
            return _error(404, str(missing))
        except (ReportError, RunLogError, StoreError) as problem:
            return _error(422, str(problem))
        except OSError as problem:
            return _error(422, f"{problem.filename or 'a run file'}: {problem.strerror or problem}")

    return route


def create_app(
    folders: list[Path],
    *,
    token: str | None = None,
    loopback: bool = True,
    cache: DiskCache | None = None,
    prewarm: bool = False,
) -> ASGIApp:
    """The viewer over the runs under `folders`; with `token`, every request must carry it; overviews kept in
    `cache` (on disk) too; with `prewarm`, computed on a thread from the start."""
    viewer = Viewer(folders, cache)
    if prewarm:
        threading.Thread(target=viewer.prewarm, name="viewer-prewarm", daemon=True).start()
    static = files(__package__) / "static"

    def page(request: Request) -> Response:
        return Response(static.joinpath("index.html").read_text(encoding="utf-8"), media_type="text/html")

    def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "vega.js":
            from ..plots import javascript

            return Response(javascript(), media_type="text/javascript")
        kinds = {"viewer.js": "text/javascript", "viewer.css": "text/css"}
        if name not in kinds:
            return _error(404, f"no file {name!r}")
        return Response(static.joinpath(name).read_text(encoding="utf-8"), media_type=kinds[name])

    def runs(request: Request) -> Response:
        return JSONResponse(
            {"folders": [str(f) for f in viewer.folders], "runs": [_listed(viewer, e) for e in viewer.entries()]}
        )

    def run(request: Request) -> Response:
        return JSONResponse(describe(viewer.entry(request.path_params["key"])))

    def run_overview(request: Request) -> Response:
        entry = viewer.entry(request.path_params["key"])
        return JSONResponse({"run": describe(entry), **viewer.overviews.get(entry.path)})

    def task(request: Request) -> Response:
        key, task_id = request.path_params["key"], request.path_params["task"]
        return JSONResponse({"run": describe(viewer.entry(key)), **task_page(viewer.task_run(key, task_id), task_id)})

    def task_diff(request: Request) -> Response:
        key, task_id = request.path_params["key"], request.path_params["task"]
        a, b = request.query_params.get("a"), request.query_params.get("b")
        if not a or not b:
            return _error(400, "a diff needs two units: ?a=UNIT&b=UNIT (the ids the task page gives)")
        return JSONResponse(diff(viewer.task_run(key, task_id), task_id, a, b))

    def report(request: Request) -> Response:
        path = viewer.entry(request.path_params["key"]).path / "report.html"
        if not path.is_file():
            return _error(404, f"{path.parent.name}: no report.html yet (compare report {path.parent} writes it)")
        return FileResponse(path, media_type="text/html", headers={"Content-Security-Policy": REPORT_CSP})

    async def live(request: Request) -> Response:
        try:
            following = viewer.live_run(request.path_params["key"])
        except LookupError as missing:
            return _error(404, str(missing))
        return StreamingResponse(
            _events(request, following), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )

    routes = [
        Route("/", page),
        Route("/runs/{key}", page),
        Route("/runs/{key}/report.html", _guarded(report)),
        Route("/runs/{key}/tasks/{task:path}", page),
        Route("/static/{name}", asset),
        Route("/api/runs", _guarded(runs)),
        Route("/api/runs/{key}", _guarded(run)),
        Route("/api/runs/{key}/overview", _guarded(run_overview)),
        Route("/api/runs/{key}/live", live),
        Route("/api/runs/{key}/tasks/{task:path}", _guarded(task)),
        Route("/api/runs/{key}/diff/{task:path}", _guarded(task_diff)),
    ]
    return Guard(Starlette(routes=routes), token=token, loopback=loopback)


LISTED_AT_ONCE = 2_000  # units of a run whose overview the runs list computes itself; larger ones: the prewarm's


def _listed(viewer: Viewer, entry: RunEntry) -> dict[str, Any]:
    """A run as the runs list shows it: its manifest's facts and its headline, when its overview is at hand or
    small enough to compute now (a large run's is computed on the prewarm thread: the list never waits for it;
    `headline` None meanwhile)."""
    found = describe(entry)
    try:
        kept = viewer.overviews.peek(entry.path)
        if kept is None and found["done"] <= LISTED_AT_ONCE:
            kept = viewer.overviews.get(entry.path)
        found["headline"] = kept["headline"] if kept is not None else None
    except (ReportError, RunLogError, StoreError, OSError) as problem:
        found["headline"], found["problem"] = [], str(problem)
    return found


async def _events(request: Request, following: LiveRun):  # type: ignore[no-untyped-def]
    """Server-sent events: `progress` with the run's state whenever it changed, `end` once it stopped running."""
    sent, quiet = "", 0.0
    while not await request.is_disconnected():
        state = await asyncio.to_thread(following.snapshot)
        text = json.dumps(state, ensure_ascii=False)
        if text != sent:
            sent, quiet = text, 0.0
            yield f"event: progress\ndata: {text}\n\n"
        if state["status"] != "running":
            yield f"event: end\ndata: {json.dumps({'status': state['status']})}\n\n"
            return
        quiet += LIVE_POLL_S
        if quiet >= HEARTBEAT_S:
            quiet = 0.0
            yield ": still running\n\n"
        await asyncio.sleep(LIVE_POLL_S)


class Guard:
    """Read-only, loopback hosts only (or the token), and the pages' security headers."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app, self.token, self.loopback = app, token, loopback

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self._refusal(scope)
        if refused is not None:
            return await refused(scope, receive, send)

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                if not any(name.lower() == b"content-security-policy" for name, _ in headers):  # report.html: its own
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                headers += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _refusal(self, scope: Scope) -> Response | None:
        if scope["method"] not in ("GET", "HEAD"):
            return PlainTextResponse("the viewer is read-only: GET and HEAD only", 405, headers={"Allow": "GET, HEAD"})
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        if self.loopback and _hostname(headers.get("host", "")) not in LOOPBACK_NAMES:
            return PlainTextResponse("the viewer answers requests for 127.0.0.1 or localhost only", 403)
        if self.token is None:
            return None
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [""])[0]
        if given and hmac.compare_digest(given, self.token):
            rest = urlencode({k: v for k, v in query.items() if k != "token"}, doseq=True)
            where = scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"viewer_token={self.token}; HttpOnly; SameSite=Strict; Path=/"
            return Response(status_code=303, headers={"Location": where, "Set-Cookie": cookie})
        cookies = dict(part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part)
        if hmac.compare_digest(cookies.get("viewer_token", ""), self.token):
            return None
        return PlainTextResponse("this viewer needs its token: open the address `compare view` printed", 401)


def _hostname(host: str) -> str:
    if host.startswith("["):  # [::1]:8765
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
