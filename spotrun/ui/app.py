"""The dashboard's web app (Starlette): the pages, their JSON, and the two buttons.

Safe by default: every request must carry the token (`?token=` in the URL `spotrun ui`
prints, or the X-Spotrun-Token header the pages send); a request that changes state (stop,
resume) must also come from the dashboard's own origin. Reading runs happens on the event
loop's thread over one ledger connection; a stop or resume, which can wait on the run, runs in
a worker thread over its own.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from spotrun.core.errors import NotFoundError, SpotrunError, StateError, UsageError
from spotrun.service.lookup import open_ledger
from spotrun.service.resume import resume
from spotrun.service.runs import parse_since, stop
from spotrun.store.ledger import Ledger
from spotrun.ui import tensorboard, views

TOKEN_HEADER = "x-spotrun-token"
STATIC = ("app.js", "style.css")
TYPES = {"js": "text/javascript", "css": "text/css"}
PAGES = ("/", "/run/{ref}", "/compare", "/sweep/{ref}", "/cost")
Handler = Callable[[Request], Awaitable[Response]]


class Dashboard:
    """The app's state: the ledger it reads, the token it asks for, TensorBoard if started."""

    def __init__(self, ledger: Ledger, token: str) -> None:
        self.ledger = ledger
        self.token = token
        self.board: tensorboard.TensorBoard | None = None
        self.links_refreshed_for: tuple[str, ...] = ()

    # ------------------------------------------------------------------ guards
    def allowed(self, request: Request) -> bool:
        given = request.headers.get(TOKEN_HEADER) or request.query_params.get("token") or ""
        return hmac.compare_digest(given.encode(), self.token.encode())

    @staticmethod
    def same_origin(request: Request) -> bool:
        """The request comes from a page this server served (the browser says so)."""
        host = request.headers.get("host", "")
        origin = request.headers.get("origin") or request.headers.get("referer")
        if not origin or not host:
            return False
        parts = urlsplit(origin)
        site = request.headers.get("sec-fetch-site")
        return parts.netloc == host and (site is None or site == "same-origin")

    def guarded(self, handler: Handler, *, changes_state: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            if not self.allowed(request):
                return PlainTextResponse("this dashboard needs its token (see `spotrun ui`)", 403)
            if changes_state and not self.same_origin(request):
                return PlainTextResponse("refused: not from the dashboard's own page", 403)
            try:
                return await handler(request)
            except NotFoundError as exc:
                return _error(exc, 404)
            except (UsageError, StateError) as exc:
                return _error(exc, 400)
            except SpotrunError as exc:
                return _error(exc, 500)

        return endpoint

    # ------------------------------------------------------------------ pages
    async def page(self, request: Request) -> Response:
        shell = resources.files("spotrun.ui").joinpath("static", "index.html").read_text()
        headers = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:"}
        headers["Referrer-Policy"] = "no-referrer"  # the token stays off other sites' logs
        return HTMLResponse(shell.replace("{{token}}", self.token), headers=headers)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return PlainTextResponse("not found", 404)
        text = resources.files("spotrun.ui").joinpath("static", name).read_text()
        return Response(text, media_type=TYPES[name.rsplit(".", 1)[1]])

    # ------------------------------------------------------------------ data
    async def runs(self, request: Request) -> Response:
        q = request.query_params
        since = parse_since(q["since"]) if q.get("since") else None
        data = views.runs_page(self.ledger, state=q.get("state"), sweep=q.get("sweep"), since=since)
        self._refresh_links()
        return self._json(data, self._all_secrets())

    async def run(self, request: Request) -> Response:
        ref = request.path_params["ref"]
        data = views.run_page(self.ledger, ref)
        if tensorboard.installed():
            data["tensorboard"] = f"/tensorboard/{data['summary']['id']}"
        return self._json(data, views.secret_values(self.ledger.resolve(ref)))

    async def curves(self, request: Request) -> Response:
        q = request.query_params
        refs = [r for r in q.get("runs", "").split(",") if r]
        data = views.curves_page(self.ledger, refs, q.get("metric") or None, q.get("x", "step"))
        return self._json(data, self._all_secrets())

    async def sweeps(self, request: Request) -> Response:
        return self._json(views.sweeps_list(self.ledger), set())

    async def sweep(self, request: Request) -> Response:
        data = views.sweep_page(self.ledger, request.path_params["ref"])
        return self._json(data, self._all_secrets())

    async def cost(self, request: Request) -> Response:
        q = request.query_params
        data = views.cost_page(self.ledger, sweep=q.get("sweep") or None, by=q.get("by", "run"))
        return self._json(data, set())

    async def tensorboard_view(self, request: Request) -> Response:
        run = self.ledger.resolve(request.path_params["ref"])
        if not tensorboard.installed():
            raise StateError("TensorBoard is not installed here", hint="pip install tensorboard")
        folder = self._refresh_links(force=True)
        if self.board is None:
            self.board = tensorboard.TensorBoard(folder)
        url = await run_in_threadpool(self.board.url_for, run.name)
        return RedirectResponse(url, 303)

    # ------------------------------------------------------------------ buttons
    async def stop_run(self, request: Request) -> Response:
        ref = request.path_params["ref"]
        run = self.ledger.resolve(ref)
        if run.is_terminal:  # what `spotrun stop` says, at once
            raise StateError(f"run {run.name} has already ended ({run.state.value})")
        ended = await run_in_threadpool(self._in_own_ledger, lambda lg: stop(lg, run.id).state)
        return self._json({"state": ended.value}, set())

    async def resume_run(self, request: Request) -> Response:
        run = self.ledger.resolve(request.path_params["ref"])
        done = await run_in_threadpool(self._in_own_ledger, lambda lg: resume(lg, run.id))
        return self._json({"resumed": str(getattr(done, "run", run).name)}, set())

    def _in_own_ledger(self, work: Callable[[Ledger], Any]) -> Any:
        ledger = open_ledger(self.ledger.settings, reconcile=False)
        try:
            return work(ledger)
        finally:
            ledger.close()

    # ------------------------------------------------------------------ helpers
    def _refresh_links(self, force: bool = False) -> Any:
        runs = self.ledger.list_runs(include_all=True)
        names = tuple(sorted(r.name for r in runs))
        folder = self.ledger.home / tensorboard.LINKS_FOLDER
        if force or names != self.links_refreshed_for:
            folder = tensorboard.refresh_links(self.ledger.home, runs)
            self.links_refreshed_for = names
        return folder

    def _all_secrets(self) -> set[str]:
        found: set[str] = set()
        for run in self.ledger.list_runs(include_all=True):
            found |= views.secret_values(run)
        return found

    @staticmethod
    def _json(data: Any, secrets: set[str]) -> Response:
        body = views.masked_json(data, secrets) if secrets else json.dumps(data, default=str)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    def close(self) -> None:
        if self.board is not None:
            self.board.close()


def _error(exc: SpotrunError, status: int) -> Response:
    body = json.dumps({"error": exc.user_message()})
    return Response(body, status_code=status, media_type="application/json")


def build_app(dashboard: Dashboard) -> Starlette:
    g = dashboard.guarded
    routes = [Route(path, g(dashboard.page)) for path in PAGES]
    routes += [
        Route("/static/{name}", g(dashboard.static)),
        Route("/api/runs", g(dashboard.runs)),
        Route("/api/run/{ref}", g(dashboard.run)),
        Route("/api/curves", g(dashboard.curves)),
        Route("/api/sweeps", g(dashboard.sweeps)),
        Route("/api/sweep/{ref}", g(dashboard.sweep)),
        Route("/api/cost", g(dashboard.cost)),
        Route("/tensorboard/{ref}", g(dashboard.tensorboard_view)),
        Route("/api/run/{ref}/stop", g(dashboard.stop_run, changes_state=True), methods=["POST"]),
        Route(
            "/api/run/{ref}/resume", g(dashboard.resume_run, changes_state=True), methods=["POST"]
        ),
    ]
    return Starlette(routes=routes)
