"""Kubernetes: pod logs, container terminations and pod events through the API (a controller-side source).

:func:`build_api_client` makes a ``kubernetes.client.ApiClient`` from :class:`KubernetesConfig`: the
named kubeconfig (and context), else the in-cluster service account, else ``~/.kube/config``. Every
call goes through :class:`ApiCalls`: a timeout on the request (``_request_timeout``), retries with
backoff on 429, 5xx and broken connections, all inside the connector's deadline, and a cap on the bytes
read (bodies are read as streams, ``_preload_content=False``, and parsed here, so a malformed answer is
an ``error`` coverage line and a huge one never lands in memory).

:class:`PodLogSource` (``kubernetes``) reads the workload's pods: the pods it names in
``Workload.pods`` (the Kueue discovery finds them through the owner Job), else those a label selector
in ``Workload.args["kubernetes"]["label_selector"]`` finds. The connector does not walk owner
references itself: finding the pods is discovery's business, reading them is this one's. It writes

- ``applog/NODE.log``: the logs of every container of the pods on NODE (pods, then containers, sorted;
  the previous instance's log before the current one when the container restarted), each section
  opened by a header line naming pod, container and instance. Lines keep the API's RFC 3339 stamps.
  NODE is the pod's ``spec.nodeName`` from the API, never anything a log line says.
- ``sacct/kubernetes.txt``: scheduler evidence, one line per container termination (current and last
  state), pod failure reason, disruption condition and pod event, sorted by time: ``TIME kubernetes
  KIND pod=NS/POD node=NODE ... message="..."``. Names come from the API and are checked against the
  Kubernetes name grammar; free text (messages, which a container can set) is quoted and comes last.

``kubernetes`` comes with the extra ``connectors`` and is imported when a client is built.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from ..config import KubernetesConfig
from ..errors import ConfigError
from .base import BundleWriter, Limits, SourceCoverage, Window, Workload
from .http import MAX_BACKOFF_S, RETRY_STATUSES, retry_after_s

__all__ = [
    "EXTRA_HINT",
    "ApiCalls",
    "KubeFailure",
    "MissingExtra",
    "PodLogSource",
    "build_api_client",
    "dig",
    "is_dns_label",
    "is_dns_subdomain",
    "kubernetes_module",
    "parse_time",
]

EXTRA_HINT = "the Kubernetes connector needs the 'kubernetes' package: pip install 'slurm-attrib[connectors]'"
CHUNK = 64 << 10
JSON_CAP = 16 << 20  # one list answer (a page of pods or events)
PAGE = 500
TAIL_READ_FACTOR = 4  # a log read for its tail stops after this many times its cap
TAIL_LINE_BYTES = 100  # tailLines asked for = the cap / this (the kubelet has no tail in bytes)
SCHEDULER_FILE = "sacct/kubernetes.txt"
MESSAGE_CAP = 300
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_SELECTOR = re.compile(r"[A-Za-z0-9_./=,!() -]{1,512}")  # label selector syntax: no quotes, no controls
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]+")


def is_dns_label(name: str) -> bool:
    """RFC 1123 label: a namespace, a container name."""
    return bool(_DNS_LABEL.fullmatch(name))


def is_dns_subdomain(name: str) -> bool:
    """RFC 1123 subdomain: a pod, node or Workload name."""
    return len(name) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(name))


class MissingExtra(ConfigError, ImportError):
    """The ``kubernetes`` package is not installed: a configuration error that names the extra, and an
    ImportError, so a caller that turns a connector without its extra into a ``skipped`` line does so."""


def kubernetes_module() -> Any:
    """The ``kubernetes`` package, or :class:`MissingExtra` naming the extra that brings it."""
    try:
        import kubernetes
    except ImportError:
        raise MissingExtra(EXTRA_HINT) from None
    return kubernetes


def build_api_client(config: KubernetesConfig) -> Any:
    """An ``ApiClient`` of its own (never the package's global default): ``kubeconfig`` (and ``context``)
    when set, else the in-cluster service account, else ``~/.kube/config``. urllib3's own retries are
    off: :class:`ApiCalls` retries within the connector's deadline."""
    k8s = kubernetes_module()
    configuration = k8s.client.Configuration()
    context = config.context or None
    try:
        if config.kubeconfig or context:
            k8s.config.load_kube_config(config_file=config.kubeconfig or None, context=context,
                                        client_configuration=configuration, persist_config=False)
        else:
            try:
                k8s.config.load_incluster_config(client_configuration=configuration)
            except k8s.config.ConfigException:
                k8s.config.load_kube_config(client_configuration=configuration, persist_config=False)
    except (k8s.config.ConfigException, OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"kubernetes: no usable configuration ({type(exc).__name__}: {str(exc)[:200]})") from None
    configuration.retries = False
    return k8s.client.ApiClient(configuration)


class KubeFailure(Exception):
    """A call that gave no answer to use: ``state`` is the coverage state it becomes (``timeout`` or
    ``error``), ``status`` the last HTTP status (0: none)."""

    def __init__(self, message: str, state: str = "error", status: int = 0) -> None:
        super().__init__(message)
        self.state = state
        self.status = status


@dataclass
class ApiCalls:
    """Every API call of a connector or a discovery: ``call`` runs one generated client method with
    ``_preload_content=False`` and a ``_request_timeout`` within the deadline, retries 429/5xx and
    broken connections with exponential backoff (a ``Retry-After`` within the cap is honoured), and
    reads at most ``cap`` bytes of the body."""

    timeout_s: float = 10.0
    retries: int = 3
    backoff_s: float = 0.5
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def json(self, what: str, method: Callable[..., Any], *args: Any, deadline: float, **kwargs: Any) -> Any:
        body, cut = self.call(what, method, *args, deadline=deadline, cap=JSON_CAP, **kwargs)
        if cut:
            raise KubeFailure(f"{what}: the answer is larger than the cap ({JSON_CAP} bytes)")
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise KubeFailure(f"{what}: the answer is not JSON: {str(exc)[:120]}") from None

    def call(self, what: str, method: Callable[..., Any], *args: Any, deadline: float, cap: int,
             tail: bool = False, **kwargs: Any) -> tuple[bytes, bool]:
        """(body, cut): the body read up to ``cap`` bytes, and whether there was more. With ``tail`` the
        last ``cap`` bytes are kept instead (a log's end is where a job fails), reading at most
        :data:`TAIL_READ_FACTOR` times ``cap``."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        tries, status, wait = 0, 0, self.backoff_s
        while True:
            tries += 1
            left = deadline - self.clock()
            if left <= 0:
                raise KubeFailure(f"{what}: no time left ({tries - 1} tries)", "timeout", status)
            timed_out, retry_after = False, None
            try:
                response = method(*args, _preload_content=False, _request_timeout=min(self.timeout_s, left), **kwargs)
                return _read_capped(response, cap, what, deadline, self.clock, tail)
            except ApiException as exc:
                status = int(exc.status or 0)
                if status not in RETRY_STATUSES:
                    raise KubeFailure(f"{what}: HTTP {status} {_short(str(exc.reason or ''))}".rstrip(),
                                      status=status) from None
                problem, retry_after = f"HTTP {status}", retry_after_s(_header(exc, "Retry-After"))
            except urllib3.exceptions.HTTPError as exc:
                timed_out = isinstance(exc, urllib3.exceptions.TimeoutError) or isinstance(
                    getattr(exc, "reason", None), urllib3.exceptions.TimeoutError)
                problem = "no answer in time" if timed_out else f"connection failed: {type(exc).__name__}"
            except OSError as exc:
                problem = f"connection failed: {type(exc).__name__}"
            if tries > self.retries:
                raise KubeFailure(f"{what}: {problem} ({tries} tries)", "timeout" if timed_out else "error", status)
            pause = min(MAX_BACKOFF_S, retry_after if retry_after is not None else wait)
            if deadline - self.clock() <= pause:
                raise KubeFailure(f"{what}: {problem}; no time left to retry ({tries} tries)", "timeout", status)
            self.sleep(pause)
            wait = min(MAX_BACKOFF_S, wait * 2)


def _read_capped(response: Any, cap: int, what: str, deadline: float, clock: Callable[[], float],
                 tail: bool = False) -> tuple[bytes, bool]:
    kept = bytearray()
    size, cut = 0, False
    try:
        for chunk in response.stream(CHUNK, decode_content=True):
            if clock() > deadline:
                raise KubeFailure(f"{what}: the answer was still coming when the time was up", "timeout")
            kept += chunk
            size += len(chunk)
            if len(kept) > cap:
                cut = True
                if not tail:
                    return bytes(kept[:cap]), True
                del kept[: len(kept) - cap]
            if tail and size > TAIL_READ_FACTOR * cap:  # more than the kubelet's tail should send
                return bytes(kept[: kept.rfind(b"\n") + 1]), True  # the end of what came, whole lines
    finally:
        response.release_conn()
    return bytes(kept), cut


def _header(exc: Any, name: str) -> Any:
    """A header of the answer an ApiException carries (None without one)."""
    headers: Any = getattr(exc, "headers", None)
    return headers.get(name) if hasattr(headers, "get") else None


def _short(text: str) -> str:
    return " ".join(text.split())[:200]


# --- reading the pods ------------------------------------------------------------------------------


@dataclass
class _Budget:
    """What the source may still write: ``left`` bytes of the workload's ``max_bytes``."""

    left: int
    cut: list[str] = field(default_factory=list)
    timed_out: str = ""  # the call that ran out of time: what was read until then is kept


@dataclass(frozen=True)
class _Pod:
    name: str
    node: str  # "" when not scheduled (or a name that fails the grammar)
    raw: Mapping[str, Any]


class PodLogSource:
    """Pod logs, container terminations and pod events of a Kubernetes workload (module docstring)."""

    name = "kubernetes"

    def __init__(self, api_client: Any, *, max_log_bytes: int = 4 << 20, calls: Optional[ApiCalls] = None) -> None:
        self.api_client = api_client
        self.max_log_bytes = max_log_bytes
        self.calls = calls or ApiCalls()

    @classmethod
    def from_config(cls, config: KubernetesConfig) -> PodLogSource:
        return cls(build_api_client(config), max_log_bytes=config.max_log_bytes,
                   calls=ApiCalls(timeout_s=config.timeout_s, retries=config.retries))

    def collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits) -> SourceCoverage:
        began = self.calls.clock()
        deadline = began + limits.seconds
        namespace = workload.namespace
        if not is_dns_label(namespace):
            return SourceCoverage(self.name, "skipped", f"namespace {namespace[:80]!r} is not a Kubernetes name")
        own = workload.args.get("kubernetes")
        selector = str(own.get("label_selector") or "") if isinstance(own, Mapping) else ""
        if not workload.pods and not selector:
            return SourceCoverage(self.name, "skipped", "the workload names no pods and no label selector")
        if selector and not _SELECTOR.fullmatch(selector):
            return SourceCoverage(self.name, "skipped", "the label selector holds characters a selector cannot")
        query = _short(f"pods in {namespace}: " + (", ".join(workload.pods) if workload.pods else selector))
        try:
            return self._collect(workload, window, bundle, limits, deadline, selector, query)
        except KubeFailure as failure:
            return SourceCoverage(self.name, failure.state, str(failure), query=query,
                                  seconds=self.calls.clock() - began)

    def _collect(self, workload: Workload, window: Window, bundle: BundleWriter, limits: Limits, deadline: float,
                 selector: str, query: str) -> SourceCoverage:
        began = self.calls.clock()
        notes: list[str] = []
        pods = self._pods(workload.namespace, workload.pods, selector, deadline, notes)
        if not pods:
            return SourceCoverage(self.name, "empty", "no pod of the workload found (deleted already?)",
                                  query=query, notes=tuple(notes), seconds=self.calls.clock() - began)
        budget = _Budget(limits.max_bytes)
        lines = [line for pod in pods for line in _status_lines(workload.namespace, pod, window)]
        for pod in pods:
            try:
                lines.extend(self._event_lines(workload.namespace, pod, deadline, notes))
            except KubeFailure as failure:
                if failure.state != "timeout":
                    raise
                budget.timed_out = str(failure)
                break
        files: list[str] = []
        written = 0
        scheduler = _scheduler_file(workload.namespace, lines)
        if scheduler:
            written += bundle.write(SCHEDULER_FILE, _fit(scheduler, budget, SCHEDULER_FILE))
            files.append(SCHEDULER_FILE)
        for node, text in sorted(self._logs(workload.namespace, pods, deadline, budget, notes).items()):
            rel = f"applog/{node}.log"
            written += bundle.write(rel, text)
            files.append(rel)
        nodes = sorted({p.node for p in pods if p.node})
        reason = f"{len(pods)} pod(s) on {len(nodes)} node(s)"
        if budget.cut:
            reason += "; cut at the byte caps: " + ", ".join(budget.cut[:5]) + (" ..." if len(budget.cut) > 5 else "")
        if budget.timed_out:
            reason += f"; stopped, what was read is kept: {budget.timed_out}"
        state = "timeout" if budget.timed_out else "ok"
        return SourceCoverage(self.name, state, reason, files=tuple(files), bytes=written, query=query,
                              truncated=bool(budget.cut), notes=tuple(notes), seconds=self.calls.clock() - began,
                              facts={"nodes": nodes, "pods": {p.name: p.node for p in pods}})

    def _pods(self, namespace: str, wanted: tuple[str, ...], selector: str, deadline: float,
              notes: list[str]) -> list[_Pod]:
        """The workload's pods, sorted by name: listed in pages (``limit``/``continue``)."""
        k8s = kubernetes_module()
        api = k8s.client.CoreV1Api(self.api_client)
        items: list[Any] = []
        token: Optional[str] = None
        while True:
            extra: dict[str, Any] = {"_continue": token} if token else {}
            if selector:
                extra["label_selector"] = selector
            page = self.calls.json(f"list pods in {namespace}", api.list_namespaced_pod, namespace, limit=PAGE,
                                   deadline=deadline, **extra)
            items.extend(_items(page, "PodList"))
            token = _continue(page)
            if not token:
                break
        pods: dict[str, _Pod] = {}
        for item in items:
            name = str(dig(item, "metadata", "name") or "")
            if not is_dns_subdomain(name) or (wanted and name not in wanted):
                continue
            node = str(dig(item, "spec", "nodeName") or "")
            pods[name] = _Pod(name, node if is_dns_subdomain(node) else "", item)
        for name in sorted(set(wanted) - set(pods)):
            notes.append(f"pod {namespace}/{name[:80]}: not found")
        return [pods[name] for name in sorted(pods)]

    def _event_lines(self, namespace: str, pod: _Pod, deadline: float,
                     notes: list[str]) -> list[tuple[datetime, str]]:
        k8s = kubernetes_module()
        api = k8s.client.CoreV1Api(self.api_client)
        page = self.calls.json(f"list events of pod {namespace}/{pod.name}", api.list_namespaced_event, namespace,
                               field_selector=f"involvedObject.name={pod.name}", limit=PAGE, deadline=deadline)
        if _continue(page):
            notes.append(f"pod {namespace}/{pod.name}: more than {PAGE} events; the first {PAGE} read")
        out = []
        for event in _items(page, "EventList"):
            if dig(event, "involvedObject", "kind") not in (None, "Pod"):
                continue
            when = _first_time(dig(event, "lastTimestamp"), dig(event, "eventTime"),
                               dig(event, "firstTimestamp"), dig(event, "metadata", "creationTimestamp"))
            if when is None:
                continue  # an event without any time cannot be placed
            source = dig(event, "source", "component") or dig(event, "reportingController") or "?"
            out.append((when, _line("event", namespace, pod, type=_word(dig(event, "type")),
                                          reason=_word(dig(event, "reason")), count=_word(dig(event, "count") or 1),
                                          source=_word(source), message=dig(event, "message"))))
        return out

    def _logs(self, namespace: str, pods: list[_Pod], deadline: float, budget: _Budget,
              notes: list[str]) -> dict[str, bytes]:
        """Per node, the logs of its pods' containers: previous instance first, then the current one."""
        by_node: dict[str, list[bytes]] = {}
        for pod in pods:
            if not pod.node:
                notes.append(f"pod {namespace}/{pod.name}: not on a node; no log")
                continue
            for container, restarts in _containers(pod.raw):
                for previous in ((True, False) if restarts > 0 else (False,)):
                    if budget.timed_out:
                        break
                    try:
                        section = self._log(namespace, pod, container, previous, deadline, budget, notes)
                    except KubeFailure as failure:  # only a timeout comes out of _log
                        budget.timed_out = str(failure)
                        break
                    if section:
                        by_node.setdefault(pod.node, []).append(section)
        return {node: b"".join(parts) for node, parts in by_node.items()}

    def _log(self, namespace: str, pod: _Pod, container: str, previous: bool, deadline: float, budget: _Budget,
             notes: list[str]) -> bytes:
        instance = "previous" if previous else "current"
        where = f"{namespace}/{pod.name} container {container} ({instance})"
        header = f"==> kubernetes pod {namespace}/{pod.name} container {container} {instance} on {pod.node} <==\n"
        cap = min(self.max_log_bytes, budget.left - len(header))
        if cap <= 0:
            budget.cut.append(f"{where}: not read")
            return b""
        k8s = kubernetes_module()
        api = k8s.client.CoreV1Api(self.api_client)
        try:
            body, cut = self.calls.call(f"log of {where}", api.read_namespaced_pod_log, pod.name, namespace,
                                        container=container, previous=previous, timestamps=True,
                                        tail_lines=max(1, cap // TAIL_LINE_BYTES), deadline=deadline, cap=cap,
                                        tail=True)
        except KubeFailure as failure:
            if failure.state == "timeout":
                raise
            notes.append(str(failure))  # a log the kubelet no longer has (HTTP 400/404) is a note, not the end
            return b""
        if cut:
            body = body[body.find(b"\n") + 1:]  # the first line kept is a partial one: its stamp is gone
            budget.cut.append(where)
        if body and not body.endswith(b"\n"):
            body += b"\n"
        section = header.encode() + body
        budget.left -= len(section)
        return section


def _containers(pod: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(container, restart count) for every init and app container with a status, sorted by name."""
    found: dict[str, int] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for status in dig(pod, "status", key) or []:
            name = str(dig(status, "name") or "")
            if is_dns_label(name):
                found[name] = _int(dig(status, "restartCount"))
    return sorted(found.items())


def _status_lines(namespace: str, pod: _Pod, window: Window) -> list[tuple[datetime, str]]:
    """Container terminations (current and last state), the pod's failure reason and its disruption
    condition, each as (ISO time, line). A termination without a time (ContainerStatusUnknown) takes
    the pod's latest condition change, marked ``time=estimated``."""
    status = dig(pod.raw, "status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    changes = [t for t in (_first_time(c.get("lastTransitionTime")) for c in conditions) if t is not None]
    fallback = max(changes, default=window.end)
    out = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cstatus in status.get(key) or []:
            name = str(dig(cstatus, "name") or "")
            if not is_dns_label(name):
                continue
            for state_key, which in (("lastState", "last"), ("state", "current")):
                term = dig(cstatus, state_key, "terminated")
                if not isinstance(term, Mapping):
                    continue
                when = _first_time(term.get("finishedAt"))
                extra = {} if when else {"time": "estimated"}
                out.append((when or fallback, _line(
                    "container", namespace, pod, container=name, state=which, reason=_word(term.get("reason")),
                    exit_code=_word(term.get("exitCode")), signal=_word(term.get("signal") or 0),
                    restarts=_word(dig(cstatus, "restartCount") or 0), **extra, message=term.get("message"))))
    if status.get("reason"):
        out.append((fallback, _line("pod", namespace, pod, phase=_word(status.get("phase")),
                                    reason=_word(status.get("reason")), message=status.get("message"))))
    for cond in conditions:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            out.append((_first_time(cond.get("lastTransitionTime")) or fallback, _line(
                "condition", namespace, pod, type="DisruptionTarget", reason=_word(cond.get("reason")),
                message=cond.get("message"))))
    return out


def _line(kind: str, namespace: str, pod: _Pod, message: Any = None, **fields: str) -> str:
    parts = [f"kubernetes {kind} pod={namespace}/{pod.name} node={pod.node or '-'}"]
    parts.extend(f"{key}={value}" for key, value in fields.items())
    parts.append(f"message={_quote(message)}")
    return " ".join(parts)


def _scheduler_file(namespace: str, lines: Iterable[tuple[datetime, str]]) -> bytes:
    body = [f"{_iso(when)} {text}" for when, text in sorted(set(lines))]
    if not body:
        return b""
    head = f"# kubernetes: container terminations, pod reasons and events of namespace {namespace} (slurm-attrib)\n"
    return (head + "".join(line + "\n" for line in body)).encode()


def _fit(data: bytes, budget: _Budget, rel: str) -> bytes:
    if len(data) > budget.left:
        data = data[: max(0, budget.left)]
        data = data[: data.rfind(b"\n") + 1]
        budget.cut.append(rel)
    budget.left -= len(data)
    return data


def _quote(text: Any) -> str:
    """Free text (a message a container can set) on one line, quoted, capped: it can never look like a
    field of the line, nor (``|`` escaped) like a column of the sacct output read from the same folder."""
    flat = " ".join(_CONTROLS.sub(" ", str(text or "")).split())
    return json.dumps(flat[:MESSAGE_CAP], ensure_ascii=True).replace("|", "\\u007c")


def _word(value: Any) -> str:
    text = str(value) if value is not None else ""
    return text if _WORD.fullmatch(text) else "?"


def _items(page: Any, kind: str) -> list[Mapping[str, Any]]:
    items = page.get("items") if isinstance(page, Mapping) else None
    if not isinstance(items, list):
        raise KubeFailure(f"the answer is not a {kind} (no items list)")
    return [item for item in items if isinstance(item, Mapping)]


def _continue(page: Mapping[str, Any]) -> Optional[str]:
    token = dig(page, "metadata", "continue")
    return token if isinstance(token, str) and token else None


def dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...`` of an API object, or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _first_time(*values: Any) -> Optional[datetime]:
    """The first value that is an RFC 3339 time, in UTC."""
    for value in values:
        if isinstance(value, str) and value:
            parsed = parse_time(value)
            if parsed is not None:
                return parsed
    return None


def parse_time(value: str) -> Optional[datetime]:
    """An API time (``2026-11-20T10:21:58Z``, with an optional fraction or offset) as an aware datetime."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?([+-]\d\d:\d\d)", text)
    if not match:
        return None
    fraction = (match.group(2) or "")[:7]
    try:
        parsed = datetime.fromisoformat(match.group(1) + fraction + match.group(3))
    except ValueError:
        return None
    return parsed.astimezone(timezone.utc)


def _iso(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return text + (f".{moment.microsecond:06d}" if moment.microsecond else "") + "Z"
