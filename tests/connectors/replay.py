"""A loopback HTTP server that replays recorded answers: the stand-in for backends that cannot run here
(Loki, the Kubernetes API). Routes are matched on method and path; each route holds a list of
answers served in turn (the last one repeats), and an answer may be a callable that sees the request
(paging by query parameters). Every request is recorded, headers included, so tests can check what
was sent (and that no secret went where it should not)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Union
from urllib.parse import parse_qs, urlsplit

from requests.structures import CaseInsensitiveDict

RECORDED = Path(__file__).parent / "recorded"


@dataclass
class Answer:
    status: int = 200
    body: Union[bytes, str, Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait this long before answering (a backend that hangs)
    trickle_s: float = 0.0  # send the body a byte at a time, this long apart

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Mapping[str, str]  # looked up without regard to case, as HTTP header names are
    body: bytes

    def param(self, name: str, default: str = "") -> str:
        return self.query.get(name, [default])[0]


Handler = Callable[[Request], Answer]


class ReplayServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Union[Answer, Handler]]] = {}
        self.served: dict[tuple[str, str], int] = {}
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.url = ""

    def route(self, method: str, path: str, *answers: Union[Answer, Handler]) -> None:
        self.routes[(method, path)] = list(answers)

    def calls(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.path == path]

    def answer(self, request: Request) -> Answer:
        with self.lock:
            self.requests.append(request)
            key = (request.method, request.path)
            answers = self.routes.get(key)
            if not answers:
                return Answer(404, {"message": f"no route for {request.method} {request.path}"})
            n = self.served.get(key, 0)
            self.served[key] = n + 1
            chosen = answers[min(n, len(answers) - 1)]
        return chosen(request) if callable(chosen) else chosen


def kube_client(url: str) -> Any:
    """A Kubernetes ``ApiClient`` of its own pointed at a replay server (no kubeconfig, no global state;
    urllib3's retries off, as the connector's own retry)."""
    import kubernetes

    configuration = kubernetes.client.Configuration()
    configuration.host = url
    configuration.retries = False
    return kubernetes.client.ApiClient(configuration)


@contextmanager
def replay_server() -> Iterator[ReplayServer]:
    replay = ReplayServer()

    class Handle(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            query = parse_qs(parts.query, keep_blank_values=True)
            if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded") and body:
                for key, values in parse_qs(body.decode(), keep_blank_values=True).items():
                    query.setdefault(key, []).extend(values)
            headers = CaseInsensitiveDict({k: v for k, v in self.headers.items()})  # clients differ in case
            request = Request(self.command, parts.path, query, headers, body)
            answer = replay.answer(request)
            if answer.delay_s:
                time.sleep(answer.delay_s)
            payload = answer.payload()
            try:
                self.send_response(answer.status)
                headers = {"Content-Type": "application/json", **answer.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if answer.trickle_s:
                    for i in range(len(payload)):
                        self.wfile.write(payload[i:i + 1])
                        self.wfile.flush()
                        time.sleep(answer.trickle_s)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    replay.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield replay
    finally:
        server.shutdown()
        server.server_close()
