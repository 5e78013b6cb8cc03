"""HTTP for the connectors that read a backend over the network (Loki, Prometheus, the service sink).

One :class:`HttpClient` per backend: a ``requests`` session with TLS verification on by default (a
site CA through ``ca_bundle``), a bearer token or basic-auth password read from a root-only file, a
timeout on every request, retries with exponential backoff on 429, 5xx and refused connections (a
``Retry-After`` within the cap is honoured), all inside the connector's own deadline, and a cap on
the bytes of one response body (read as a stream, so a huge answer never lands in memory). Secrets
stay in the session: error messages name the method, the path and the status, never a header.

``requests`` comes with the extra ``connectors``; it is imported when a client is built, so a node
without it still runs the collector.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional
from urllib.parse import urljoin

from ..config import HttpConfig
from ..errors import ConfigError
from ..tokenfile import read_token_file

if TYPE_CHECKING:
    import requests

__all__ = ["MAX_BACKOFF_S", "RETRY_STATUSES", "HttpClient", "HttpFailure", "Response", "retry_after_s"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF_S = 8.0
CHUNK = 64 << 10


class HttpFailure(Exception):
    """A request that did not give an answer to use: ``state`` is the coverage state it becomes
    (``timeout`` or ``error``), ``status`` the last HTTP status (0: none), ``tries`` how many were made."""

    def __init__(self, message: str, state: str = "error", status: int = 0, tries: int = 1) -> None:
        super().__init__(message)
        self.state = state
        self.status = status
        self.tries = tries


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    tries: int

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HttpFailure(f"the answer is not JSON: {exc}", tries=self.tries) from None


class HttpClient:
    """Requests to one backend. ``deadline`` (a ``time.monotonic()`` value) bounds a call with all its
    retries; ``clock`` and ``sleep`` are injected so tests do not wait."""

    def __init__(self, settings: HttpConfig, *, session: Optional[requests.Session] = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if not settings.url:
            raise ConfigError("no url configured")
        if not settings.url.startswith(("http://", "https://")):
            raise ConfigError(f"{settings.url!r}: the url must start with http:// or https://")
        self.settings = settings
        self.base = settings.url.rstrip("/") + "/"
        self.clock = clock
        self.sleep = sleep
        self.session = session if session is not None else _session(settings)

    def get(self, path: str, params: Optional[Mapping[str, Any]] = None, deadline: Optional[float] = None) -> Response:
        return self.request("GET", path, params=params, deadline=deadline)

    def request(self, method: str, path: str, *, params: Optional[Mapping[str, Any]] = None, data: Any = None,
                headers: Optional[Mapping[str, str]] = None, deadline: Optional[float] = None,
                max_bytes: Optional[int] = None) -> Response:
        """One call, retried on 429/5xx and connection failures until it answers, the retries are spent or
        the deadline passes. A 4xx other than 429 is final (a wrong query does not get better)."""
        import requests

        url = urljoin(self.base, path.lstrip("/"))
        cap = self.settings.max_bytes if max_bytes is None else max_bytes
        where = f"{method} {path}"
        tries = 0
        status = 0
        wait = self.settings.backoff_s
        while True:
            tries += 1
            timeout = self._timeout(deadline, where, tries, status)
            retry_after: Optional[float] = None
            try:
                with self.session.request(method, url, params=params, data=data, headers=headers,
                                          timeout=timeout, stream=True, allow_redirects=False) as answer:
                    status = answer.status_code
                    if status not in RETRY_STATUSES:
                        if status >= 400:
                            raise HttpFailure(f"{where}: HTTP {status}: {_snippet(answer)}", status=status, tries=tries)
                        if 300 <= status < 400:
                            raise HttpFailure(f"{where}: HTTP {status} redirect not followed", status=status,
                                              tries=tries)
                        return Response(status, self._read_capped(answer, cap, where, tries, deadline), tries)
                    retry_after = retry_after_s(answer.headers.get("Retry-After"))
                    problem = f"HTTP {status}"
            except requests.Timeout:
                problem = "no answer in time"
                if tries > self.settings.retries or self._left(deadline) <= 0:
                    raise HttpFailure(f"{where}: {problem} ({tries} tries)", "timeout", status, tries) from None
            except requests.ConnectionError as exc:
                problem = f"connection failed: {_reason(exc)}"
            except requests.RequestException as exc:
                raise HttpFailure(f"{where}: {type(exc).__name__}: {_reason(exc)}", tries=tries) from None
            if tries > self.settings.retries:
                raise HttpFailure(f"{where}: {problem} ({tries} tries)", status=status, tries=tries)
            pause = min(MAX_BACKOFF_S, retry_after if retry_after is not None else wait)
            if self._left(deadline) <= pause:
                raise HttpFailure(f"{where}: {problem}; no time left to retry ({tries} tries)", "timeout", status,
                                  tries)
            self.sleep(pause)
            wait = min(MAX_BACKOFF_S, wait * 2)

    def _read_capped(self, answer: requests.Response, cap: int, where: str, tries: int,
                     deadline: Optional[float]) -> bytes:
        """The body, read as a stream: past ``cap`` bytes or the deadline (a server that trickles) it stops."""
        declared = answer.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise HttpFailure(f"{where}: the answer ({declared} bytes) is larger than the cap ({cap} bytes)",
                              tries=tries)
        chunks: list[bytes] = []
        size = 0
        for chunk in _chunks(answer):
            size += len(chunk)
            if size > cap:
                raise HttpFailure(f"{where}: the answer is larger than the cap ({cap} bytes)", tries=tries)
            if self._left(deadline) <= 0:
                raise HttpFailure(f"{where}: the answer was still coming when the time was up", "timeout",
                                  answer.status_code, tries)
            chunks.append(chunk)
        return b"".join(chunks)

    def _left(self, deadline: Optional[float]) -> float:
        return float("inf") if deadline is None else deadline - self.clock()

    def _timeout(self, deadline: Optional[float], where: str, tries: int, status: int) -> float:
        left = self._left(deadline)
        if left <= 0:
            raise HttpFailure(f"{where}: no time left ({tries - 1} tries)", "timeout", status, tries - 1)
        return min(self.settings.timeout_s, left)


def _session(settings: HttpConfig) -> requests.Session:
    import requests

    session = requests.Session()
    session.trust_env = False  # no proxy or netrc from root's environment: the config says where to go
    session.verify = settings.ca_bundle or settings.verify_tls
    session.headers["User-Agent"] = "slurm-attrib"
    for key, value in settings.headers:
        session.headers[str(key)] = str(value)
    if settings.token_file:
        tokens = read_token_file(settings.token_file)
        if not tokens:
            raise ConfigError(f"{settings.token_file}: no token in the file")
        session.headers["Authorization"] = f"Bearer {tokens[0]}"
    elif settings.username:
        if not settings.password_file:
            raise ConfigError("username is set without password_file")
        secrets = read_token_file(settings.password_file)
        if not secrets:
            raise ConfigError(f"{settings.password_file}: no password in the file")
        session.auth = (settings.username, secrets[0])
    return session




def _chunks(answer: requests.Response) -> Iterator[bytes]:
    """The body as it arrives: urllib3 2's ``read1`` returns what is there (so the deadline is checked
    between arrivals, even when a server trickles); older urllib3 waits for whole chunks."""
    read1 = getattr(answer.raw, "read1", None)
    if read1 is None:
        yield from answer.iter_content(CHUNK)
        return
    while True:
        chunk = read1(CHUNK, decode_content=True)
        if not chunk:
            return
        yield chunk


def _snippet(answer: requests.Response) -> str:
    """The start of an error body (Loki and Prometheus say what was wrong with the query there)."""
    try:
        raw = next(answer.iter_content(512), b"")
    except Exception:  # the error body is a courtesy: a broken one must not hide the status
        return ""
    text = raw.decode("utf-8", "replace")
    return " ".join(text.split())[:300]


def retry_after_s(value: Any) -> Optional[float]:
    """Seconds of a ``Retry-After`` header in its delta-seconds form (the HTTP-date form is not followed)."""
    if isinstance(value, str) and value.strip().isdigit():
        return float(value.strip())
    return None


def _reason(exc: BaseException) -> str:
    """A connection error's last cause, without the URL's query string (it can be long) or credentials."""
    inner: BaseException = exc
    while inner.__context__ is not None and inner.__context__ is not inner:
        inner = inner.__context__
    text = str(inner) or type(inner).__name__
    return text[:200]
