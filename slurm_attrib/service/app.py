"""The HTTP side of the service: FastAPI routes over :class:`.context.Service`. Every answer that is a
Diagnosis or a store report is canonical JSON (sorted keys, stable order), byte for byte what the CLI
prints; errors are ``{"detail": "<one line>"}``. The models of :mod:`.models` describe the responses
in the generated OpenAPI document."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import IO, Any, Optional

import anyio
import anyio.to_thread
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from .. import __version__, canonical
from ..connectors.spool import job_key
from ..errors import AttribError, BundleError
from ..store import StoreError, reports
from ..store.timespec import parse_when
from . import models
from .context import Service
from .guard import address_in
from .receiver import receive
from .tarsafe import ArchiveRefused, extract

JSON = "application/json"
MAX_PAGE = 1000
BINARY: dict[str, Any] = {"schema": {"type": "string", "format": "binary"}}
TAR_BODY = {"requestBody": {"required": True, "description": "the bundle as a gzip'd tar",
                            "content": {"application/gzip": BINARY}}}
TAR_OR_FORM_BODY = {"requestBody": {
    "required": True, "description": "the bundle as a gzip'd tar, or a multipart form whose file field `bundle` is one",
    "content": {"application/gzip": BINARY, "multipart/form-data": {"schema": {
        "type": "object", "required": ["bundle"], "properties": {"bundle": BINARY["schema"]}}}}}}
SPOOLED_BODY = 8 << 20  # request bodies up to this stay in memory, larger go to a temporary file


class Refused(Exception):
    """A request answered with ``status`` and a one-line ``detail``."""

    def __init__(self, status: int, detail: str, headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers


def canonical_response(data: Any, status: int = 200, headers: Optional[dict[str, str]] = None,
                       indent: Optional[int] = None) -> Response:
    """Canonical JSON (sorted keys): compact for reads (a quarter of the indented form's cost on a full
    verdict); ``indent=2`` where the answer must be byte for byte what the CLI prints."""
    return Response(canonical.dumps(data, indent=indent).encode("utf-8"), status_code=status, media_type=JSON,
                    headers=headers)


def _problem(status: int, detail: str, headers: Optional[dict[str, str]] = None) -> Response:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": models.Problem} for code in codes}


def read_threads(configured: int) -> int:
    """Threads that serve reads (``service.read_threads``; 0: the CPUs, 2 to 8)."""
    return configured if configured > 0 else min(8, max(2, os.cpu_count() or 2))


def create_app(service: Service) -> FastAPI:
    """The ASGI application of ``service`` (API, metrics, dashboard)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Reads (sync routes) run in anyio's default pool: its 40 threads fight over the GIL under load
        # (bench/service: p99 of a node page 785 ms with 40, 224 ms with 2 on 2 vCPUs). Diagnoses (POST)
        # get a limiter of their own, so a burst of them never takes the reads' threads.
        threads = read_threads(service.config.service.read_threads)
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        service.diagnose_limiter = anyio.CapacityLimiter(max(1, service.config.service.workers))
        yield

    app = FastAPI(lifespan=lifespan, title="slurm-attrib", version=__version__, docs_url=None, redoc_url=None,
                  description="Failure attribution for GPU training jobs on Slurm: diagnose bundles, receive "
                              "node bundles, read the verdict store.")
    app.state.service = service
    _install_guards(app, service)
    _install_errors(app)
    _add_write_routes(app, service)
    _add_read_routes(app, service)
    from .dashboard import add_dashboard

    add_dashboard(app, service)
    return app


# -- guards: size, rate, tokens --------------------------------------------------------------------


SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                                 b"frame-ancestors 'none'; form-action 'self'"),
    (b"referrer-policy", b"no-referrer"),
)


class _Guard:
    """Rate, size and read-token checks before any route, and the security headers on every answer. A
    plain ASGI middleware: Starlette's ``BaseHTTPMiddleware`` (``@app.middleware``) runs each request
    through an extra task and memory streams, a third of a small GET's cost (bench/service)."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, self._with_headers(send))
            return
        await self.app(scope, receive, self._with_headers(send))

    def _refusal(self, scope: Any) -> Optional[Response]:
        service = self.service
        client = scope.get("client")
        if not service.rate.allow(client[0] if client else ""):
            return _problem(429, "too many requests from this address; slow down", {"Retry-After": "1"})
        headers = {}
        for key, value in scope.get("headers") or ():
            name = key.decode("latin-1").lower()
            if name in ("content-length", "authorization"):
                headers[name] = value.decode("latin-1")
        length = headers.get("content-length")
        if length is not None and not length.isdigit():
            return _problem(400, "invalid Content-Length")
        if length is not None and int(length) > service.config.service.max_request_bytes:
            return _problem(413, f"request body larger than {service.config.service.max_request_bytes} bytes")
        if scope.get("method") in ("GET", "HEAD") and service.config.service.read_token_required \
                and scope.get("path") != "/healthz" and not service.tokens.accepts(headers.get("authorization")):
            return _problem(401, "a bearer token is needed to read", {"WWW-Authenticate": "Bearer"})
        return None

    @staticmethod
    def _with_headers(send: Any) -> Any:
        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                present = {key.lower() for key, _ in message.get("headers") or ()}
                message = {**message, "headers": [*(message.get("headers") or ()),
                                                  *((k, v) for k, v in SECURITY_HEADERS if k not in present)]}
            await send(message)

        return sending


def _install_guards(app: FastAPI, service: Service) -> None:
    app.add_middleware(_Guard, service=service)


def _require_writer(request: Request, service: Service) -> None:
    if not service.tokens.values:
        raise Refused(401, "writes need a bearer token and this service has none (service.token_file or "
                           "$SLURM_ATTRIB_SERVICE_TOKEN)", {"WWW-Authenticate": "Bearer"})
    if not service.tokens.accepts(request.headers.get("authorization")):
        raise Refused(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})


def _install_errors(app: FastAPI) -> None:
    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return _problem(exc.status, exc.detail, exc.headers)

    async def archive(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ArchiveRefused)
        return _problem(exc.status, str(exc))

    async def store(request: Request, exc: Exception) -> Response:
        return _problem(503, f"store unavailable: {exc}")

    async def attrib(request: Request, exc: Exception) -> Response:
        return _problem(400 if isinstance(exc, BundleError) else 422, str(exc))

    app.add_exception_handler(Refused, refused)
    app.add_exception_handler(ArchiveRefused, archive)
    app.add_exception_handler(StoreError, store)
    app.add_exception_handler(AttribError, attrib)


async def _body(request: Request, limit: int) -> tuple[IO[bytes], int]:
    """The request body in a spooled temporary file, refused (413) past ``limit`` bytes whatever the
    Content-Length said."""
    spooled: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOLED_BODY)  # noqa: SIM115 - returned open
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"request body larger than {limit} bytes")
            spooled.write(chunk)
    except BaseException:
        spooled.close()
        raise
    spooled.seek(0)
    return spooled, size


FORM_FIELD = "bundle"


async def _form_file(request: Request, body: IO[bytes]) -> UploadFile:
    """The ``bundle`` file of a multipart form, parsed from the already capped body; 400 without one."""
    from starlette.formparsers import MultiPartException, MultiPartParser

    async def chunks() -> AsyncGenerator[bytes, None]:
        while chunk := body.read(1 << 16):
            yield chunk

    try:
        form = await MultiPartParser(request.headers, chunks(), max_files=1, max_fields=8).parse()
    except MultiPartException as exc:
        raise Refused(400, f"invalid multipart body: {exc.message}") from None
    upload = form.get(FORM_FIELD)
    if not isinstance(upload, UploadFile):
        raise Refused(400, f"multipart body without a file field {FORM_FIELD!r}")
    upload.file.seek(0)
    return upload


# -- writes ----------------------------------------------------------------------------------------


async def _diagnosing(service: Service, body: IO[bytes], size: int, store: bool) -> Response:
    """:func:`_diagnose_upload` on a thread of the diagnoses' own limiter (``service.workers``)."""
    return await anyio.to_thread.run_sync(partial(_diagnose_upload, service, body, size, store),
                                          limiter=service.diagnose_limiter)


def _add_write_routes(app: FastAPI, service: Service) -> None:
    @app.post("/v1/diagnoses", response_model=models.Diagnosis, responses=_responses(400, 401, 413, 429, 503),
              summary="Diagnose a bundle (tar.gz); ?store=true records the verdict", openapi_extra=TAR_OR_FORM_BODY)
    async def post_diagnosis(request: Request, store: bool = False) -> Response:
        _require_writer(request, service)
        body, size = await _body(request, service.config.service.max_request_bytes)
        with body:
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                upload = await _form_file(request, body)
                with upload.file:
                    return await _diagnosing(service, upload.file, upload.size or 0, store)
            return await _diagnosing(service, body, size, store)

    async def post_node_bundle(request: Request, key: str, node: str) -> Response:
        if not address_in(request.client.host if request.client else None, service.node_networks):
            _require_writer(request, service)
        body, size = await _body(request, service.config.service.max_request_bytes)
        with body:
            done = await run_in_threadpool(receive, service.spool_dir, key, node, body, size, service.limits)
        return canonical_response(done.to_dict())

    @app.post("/v1/node-bundles", response_model=models.NodeBundleReceipt,
              responses=_responses(400, 401, 413, 429), summary="Receive a node bundle as the epilog sends it "
              "(headers X-Slurm-Attrib-Job-Key and X-Slurm-Attrib-Node)", openapi_extra=TAR_BODY)
    async def post_node_bundle_headers(request: Request) -> Response:
        key = request.headers.get("x-slurm-attrib-job-key", "")
        node = request.headers.get("x-slurm-attrib-node", "")
        if not key or not node:
            raise Refused(400, "X-Slurm-Attrib-Job-Key and X-Slurm-Attrib-Node headers are required")
        return await post_node_bundle(request, key, node)

    @app.post("/v1/node-bundles/{cluster}/{job}/{node}", response_model=models.NodeBundleReceipt,
              responses=_responses(400, 401, 413, 429), summary="Receive a node bundle for a job restart",
              openapi_extra=TAR_BODY)
    async def post_node_bundle_path(request: Request, cluster: str, job: str, node: str,
                                    restart_count: int = Query(0, ge=0)) -> Response:
        key = job_key(cluster, job, restart_count)
        if key != f"{cluster}_{job}_{restart_count}":
            raise Refused(400, "cluster and job: letters, digits, '.', '_' and '-' only")
        sent = request.headers.get("x-slurm-attrib-job-key")
        if sent is not None and sent != key:
            raise Refused(400, f"X-Slurm-Attrib-Job-Key {sent!r} does not match the path ({key!r})")
        return await post_node_bundle(request, key, node)


def _diagnose_upload(service: Service, body: IO[bytes], size: int, store: bool) -> Response:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="slurm-attrib-upload-") as scratch:
        extract(body, size, Path(scratch), service.limits)
        done = service.diagnose(Path(scratch), record=store)
    service.metrics.latency.observe(time.perf_counter() - started)
    headers = {}
    if done.stored is not None:
        headers["X-Slurm-Attrib-Verdict-Id"] = done.stored.verdict_id
        headers["X-Slurm-Attrib-Stored"] = "store" if done.stored.where == "store" else "spooled"
    return canonical_response(done.diagnosis.to_dict(), headers=headers, indent=2)  # the CLI's bytes


# -- reads -----------------------------------------------------------------------------------------


def _window(since: Optional[str], until: Optional[str], service: Service) -> reports.Window:
    now = service.clock()
    return reports.Window(since=parse_when(since, now) if since else None,
                          until=parse_when(until, now) if until else None)


def _cursor(text: Optional[str]) -> Optional[tuple[str, int]]:
    if not text:
        return None
    when, _, row = text.rpartition("~")
    if not when or not row.isdigit():
        raise Refused(400, f"invalid cursor {text!r}")
    return when, int(row)


def _add_read_routes(app: FastAPI, service: Service) -> None:
    @app.get("/healthz", response_model=models.Health)
    def healthz() -> Response:
        store = "ok" if Path(service.store_path).is_file() else "absent"
        return canonical_response({"status": "ok", "version": __version__, "store": store})

    @app.get("/v1/diagnoses", response_model=models.VerdictPage, responses=_responses(400, 401, 429, 503),
             summary="Stored verdicts, newest first (the filters of `slurm-attrib query`)")
    def list_diagnoses(node: Optional[str] = None, user: Optional[str] = None, partition: Optional[str] = None,
                       category: Optional[str] = None, status: Optional[str] = None,
                       responsible: Optional[str] = None, cluster: Optional[str] = None,
                       since: Optional[str] = None, until: Optional[str] = None,
                       limit: int = Query(50, ge=1, le=MAX_PAGE), cursor: Optional[str] = None) -> Response:
        flt = reports.VerdictFilter(window=_window(since, until, service), node=node, user=user,
                                    partition=partition, category=category, status=status,
                                    responsible=responsible, cluster=cluster, limit=limit, after=_cursor(cursor))
        if not service.has_store():  # a new site: nothing recorded yet
            return canonical_response({"items": [], "next_cursor": None})
        with service.reading() as st:
            rows, after = reports.query_verdict_page(st, flt)
        return canonical_response({"items": rows, "next_cursor": f"{after[0]}~{after[1]}" if after else None})

    @app.get("/v1/diagnoses/{cluster}/{job}", response_model=models.JobVerdict,
             responses=_responses(401, 404, 429, 503), summary="A stored verdict with history and evidence files")
    def get_diagnosis(cluster: str, job: str) -> Response:
        found = service.job_verdict(cluster, job)
        if found is None:
            raise Refused(404, f"no verdict for job {job} on cluster {cluster}")
        return canonical_response(found)

    @app.get("/v1/nodes", response_model=list[models.NodeRow], responses=_responses(401, 429, 503),
             summary="Repeat offenders: culprit counts per node (`slurm-attrib nodes`)")
    def get_nodes(since: Optional[str] = None, until: Optional[str] = None, min_jobs: int = Query(1, ge=1),
                  limit: Optional[int] = Query(None, ge=1)) -> Response:
        if not service.has_store():
            return canonical_response([])
        with service.reading() as st:
            rows = reports.node_offenders(st, _window(since, until, service), min_jobs, False, limit)
        return canonical_response(rows)

    @app.get("/v1/stats", response_model=list[models.StatsBucket], responses=_responses(400, 401, 429, 503),
             summary="Counts and lost GPU-hours per bucket (`slurm-attrib stats --format json`)")
    def get_stats(since: Optional[str] = None, until: Optional[str] = None,
                  by: str = Query("week", pattern="^(day|week)$")) -> Response:
        if not service.has_store():
            return canonical_response([])
        with service.reading() as st:
            buckets = reports.verdict_stats(st, _window(since, until, service), by)
        return canonical_response([b.to_dict() for b in buckets])

    @app.get("/v1/rules", response_model=list[models.RuleInfo], summary="The rules in execution order")
    def get_rules() -> Response:
        return canonical_response(rule_list(service))

    @app.get("/metrics", response_class=Response, summary="Prometheus exposition")
    def metrics() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


def rule_list(service: Service) -> list[dict[str, Any]]:
    with service.engines.engine() as engine:
        return [{"id": r.id, "version": r.version, "phase": r.phase, "title": r.title, "origin": r.origin,
                 "status": r.status} for r in engine.ruleset.rules]
