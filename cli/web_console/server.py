"""The console's trio shell: a poller that asks the cluster and scrapes the nodes' metrics
every ``interval_s`` (blocking calls, in worker threads), and a Starlette app served by
Hypercorn on trio that answers from the poller's latest results.

A page load never waits for the cluster: it gets what the last poll saw.  Endpoints:
``/`` the page, ``/panels`` its body (what the page's script swaps in), ``/api/snapshot``
the snapshot as JSON, ``/static/*`` the script and the style sheet.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from cli.admin_client import AdminClient, AdminError
from cli.top import Endpoint, discover, scrape
from cli.web_console import page, snapshot
from cli.web_console.throughput import Throughput

log = logging.getLogger("kraft.console")
STATIC = Path(__file__).with_name("static")
REDISCOVER_S = 30.0  # how often to ask the cluster again for the nodes' metrics endpoints


@dataclass
class Console:
    admin: AdminClient
    bootstrap: str
    bootstrap_controller: str | None = None
    command_config: str | None = None  # client properties (TLS, SASL) for discovery too
    interval_s: float = 2.0
    throughput: Throughput = field(default_factory=Throughput)
    snap: dict | None = None
    endpoints: dict[str, Endpoint] = field(default_factory=dict)  # label -> endpoint
    known_brokers: dict[int, dict] = field(default_factory=dict)
    scrape_errors: dict[str, str] = field(default_factory=dict)
    poll_error: str | None = None
    _discovered_at: float = float("-inf")

    # ------------------------------------------------------------ polling (worker threads)

    def _discover(self) -> None:
        try:
            found = discover(self.bootstrap, self.bootstrap_controller, self.command_config)
        except AdminError as exc:
            log.warning("cannot discover the metrics endpoints: %s", exc)
            return
        for node_id, endpoint in found.items():
            if endpoint.url or str(node_id) not in self.endpoints:  # a node that is down keeps its URL
                self.endpoints[str(node_id)] = endpoint
        self._discovered_at = time.monotonic()

    def _scrape(self, label: str) -> dict | None:
        endpoint = self.endpoints[label]
        if endpoint.url is None:
            self.scrape_errors[label] = "kraft.metrics.port not set"
            return None
        try:
            samples = scrape(endpoint.url, timeout_s=max(1.0, self.interval_s))
        except OSError as exc:
            self.scrape_errors[label] = str(getattr(exc, "reason", exc))
            return None
        self.scrape_errors.pop(label, None)
        return samples

    async def poll_once(self) -> None:
        if time.monotonic() - self._discovered_at >= REDISCOVER_S:
            await trio.to_thread.run_sync(self._discover)
        scrapes: dict[str, dict | None] = {}

        async def one(label):
            scrapes[label] = await trio.to_thread.run_sync(self._scrape, label)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._collect)
            for label in list(self.endpoints):
                nursery.start_soon(one, label)
        self.throughput.add_round(time.monotonic(), scrapes)

    async def _collect(self) -> None:
        try:
            self.snap = await trio.to_thread.run_sync(snapshot.collect, self.admin, self.known_brokers)
            self.poll_error = None
        except Exception as exc:  # noqa: BLE001 - a console outlives an answer it cannot read
            log.exception("polling the cluster failed")
            self.poll_error = f"the last poll failed ({type(exc).__name__}: {exc}); showing the one before"

    async def poll_forever(self) -> None:
        while True:
            started = trio.current_time()
            await self.poll_once()
            await trio.sleep_until(started + self.interval_s)

    # ------------------------------------------------------------ rendering

    def metrics_note(self) -> str:
        if not self.endpoints:
            return "no metrics endpoints found (set kraft.metrics.port on the nodes, or pass --metrics)"
        up = len(self.endpoints) - len(self.scrape_errors)
        down = "; ".join(f"node {k}: {v}" for k, v in sorted(self.scrape_errors.items()))
        return f"metrics from {up}/{len(self.endpoints)} nodes" + (f" (not answering: {down})" if down else "")

    def panels(self) -> str:
        return page.panels(self.snap, self.throughput, time.monotonic(), self.metrics_note(), self.poll_error)

    def app(self) -> Starlette:
        async def index(request):
            return HTMLResponse(page.page(self.bootstrap, self.panels(), int(self.interval_s * 1000)))

        async def panels(request):
            return HTMLResponse(self.panels())

        async def api_snapshot(request):
            return JSONResponse({"snapshot": self.snap, "metrics": {
                label: {"url": e.url, "error": self.scrape_errors.get(label)}
                for label, e in self.endpoints.items()}})

        return Starlette(routes=[
            Route("/", index), Route("/panels", panels), Route("/api/snapshot", api_snapshot),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ])


async def serve(console: Console, host: str, port: int, announce) -> None:
    """Polls once (so that the first page has something), then serves until cancelled;
    ``announce(urls)`` is called once it listens."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = log
    await console.poll_once()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(lambda task_status: hypercorn_serve(console.app(), config,
                                                                       task_status=task_status))
        announce(urls)
        nursery.start_soon(console.poll_forever)
