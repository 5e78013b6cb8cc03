"""Kueue discovery: failed Kueue Workloads (``workloads.kueue.x-k8s.io/v1beta1``) become :class:`Found` items.

A Workload is taken when its ``Finished`` condition is ``True`` and its ``lastTransitionTime`` lies in
[since, until]. It **failed** when that condition's reason is ``Failed``; ``Succeeded`` is a success;
any other reason (Kueue before 0.9 wrote ``JobFinished`` for both) is a failure unless the message
says the job succeeded ("finished successfully", "succeeded"). Only failures are returned: the
orchestrator diagnoses failures.

Pods are found through the Workload's controlling owner, by the label its controller puts on every
pod: a batch ``Job`` → ``batch.kubernetes.io/job-name`` (and the pod's owner uid must be the Job's,
so a Job recreated under the same name is not mixed in), a ``JobSet`` →
``jobset.sigs.k8s.io/jobset-name``, a Kubeflow ``PyTorchJob`` → ``training.kubeflow.org/job-name``.
These labels are written by the workload controllers themselves on every pod they create, whatever
the Kueue version; Kueue's own pod labels differ between versions and integrations. An owner of
another kind gives a Workload without pods (the coverage then says so).

Names and namespaces come from the API, and each is checked against the Kubernetes name grammar
before it goes into a path, a selector or a key; a Workload that fails the check is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from ..config import Config
from ..connectors.base import Window, Workload
from ..connectors.kubernetes import (
    PAGE,
    ApiCalls,
    KubeFailure,
    build_api_client,
    dig,
    is_dns_label,
    is_dns_subdomain,
    kubernetes_module,
    parse_time,
)
from ..errors import AttribError
from . import Found

__all__ = ["ANNOTATION", "GROUP", "OWNER_LABELS", "KueueDiscovery", "KueueError"]

GROUP, VERSION, PLURAL = "kueue.x-k8s.io", "v1beta1", "workloads"
ANNOTATION = "slurm-attrib.io/verdict"
MERGE_PATCH = "application/merge-patch+json"
# owner (apiVersion group, kind) → the label its controller sets on every pod, valued with the owner's name
OWNER_LABELS = {
    ("batch", "Job"): "batch.kubernetes.io/job-name",
    ("jobset.x-k8s.io", "JobSet"): "jobset.sigs.k8s.io/jobset-name",
    ("kubeflow.org", "PyTorchJob"): "training.kubeflow.org/job-name",
}
_SUCCESS = re.compile(r"finished successfully|succeeded", re.IGNORECASE)
_UID = re.compile(r"[0-9a-fA-F-]{1,64}")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")  # a label's value, non-empty
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")
SEGMENT_CAP = 1024


class KueueError(AttribError):
    """The Kubernetes API could not be asked (or refused) what the discovery needs."""


class KueueDiscovery:
    """Failed Kueue Workloads of ``namespaces`` (all when empty), in the order the Discovery
    protocol asks for (end time, then key). ``budget_s`` bounds one discover or annotate call."""

    name = "kueue"

    def __init__(self, api_client: Any, namespaces: Sequence[str] = (), *, cluster: str = "kubernetes",
                 calls: Optional[ApiCalls] = None, budget_s: float = 60.0, before: timedelta = timedelta(0),
                 after: timedelta = timedelta(0), user_label: str = "slurm-attrib.io/user") -> None:
        for namespace in namespaces:
            if not is_dns_label(namespace):
                raise KueueError(f"kubernetes.namespaces: {namespace[:80]!r} is not a namespace name")
        self.api_client = api_client
        self.namespaces = tuple(sorted(set(namespaces)))
        self.cluster = cluster or "kubernetes"
        self.calls = calls or ApiCalls()
        self.budget_s = budget_s
        self.before, self.after = before, after
        self.user_label = user_label

    @classmethod
    def from_config(cls, config: Config) -> KueueDiscovery:
        """The discovery ``config.kubernetes`` describes, with the watch's evidence margins; the cluster
        is ``config.cluster`` or ``kubernetes``."""
        k8s, watch = config.kubernetes, config.watch
        return cls(build_api_client(k8s), k8s.namespaces, cluster=config.cluster or "kubernetes",
                   calls=ApiCalls(timeout_s=k8s.timeout_s, retries=k8s.retries),
                   before=timedelta(seconds=watch.window_before_s), after=timedelta(seconds=watch.window_after_s))

    def discover(self, since: datetime, until: datetime) -> list[Found]:
        since, until = _aware(since), _aware(until)
        deadline = self.calls.clock() + self.budget_s
        found: list[Found] = []
        try:
            for item in self._workloads(deadline):
                entry = self._found(item, since, until, deadline)
                if entry is not None:
                    found.append(entry)
        except KubeFailure as failure:
            raise KueueError(f"kueue: {failure}") from None
        return sorted(found, key=lambda f: (f.window.end, f.key))

    def annotate(self, found: Found, segment: str) -> str:
        """A JSON merge patch setting ``metadata.annotations["slurm-attrib.io/verdict"]`` on the Workload."""
        namespace, name = found.workload.namespace, found.workload.name
        if not is_dns_label(namespace) or not is_dns_subdomain(name):
            raise KueueError(f"kueue: {namespace[:80]!r}/{name[:80]!r} is not a Workload name; not annotated")
        value = _CONTROLS.sub(" ", segment)[:SEGMENT_CAP]
        api = kubernetes_module().client.CustomObjectsApi(self.api_client)
        try:
            self.calls.call(f"annotate workload {namespace}/{name}", api.patch_namespaced_custom_object, GROUP,
                            VERSION, namespace, PLURAL, name, {"metadata": {"annotations": {ANNOTATION: value}}},
                            _content_type=MERGE_PATCH, deadline=self.calls.clock() + self.budget_s, cap=1 << 20)
        except KubeFailure as failure:
            raise KueueError(f"kueue: {failure}") from None
        return f"workload {namespace}/{name}: annotation {ANNOTATION}={value}"

    # --- listing ------------------------------------------------------------------------------------

    def _workloads(self, deadline: float) -> list[Mapping[str, Any]]:
        api = kubernetes_module().client.CustomObjectsApi(self.api_client)
        if not self.namespaces:
            return self._pages("list workloads", api.list_cluster_custom_object, (GROUP, VERSION, PLURAL), deadline)
        items: list[Mapping[str, Any]] = []
        for namespace in self.namespaces:
            items.extend(self._pages(f"list workloads in {namespace}", api.list_namespaced_custom_object,
                                     (GROUP, VERSION, namespace, PLURAL), deadline))
        return items

    def _pages(self, what: str, method: Any, args: tuple[str, ...], deadline: float,
               **extra: Any) -> list[Mapping[str, Any]]:
        """Every item of a list call, page by page (``limit``, then ``continue`` until it is empty)."""
        items: list[Mapping[str, Any]] = []
        token: Optional[str] = None
        while True:
            more = {"_continue": token} if token else {}
            page = self.calls.json(what, method, *args, limit=PAGE, deadline=deadline, **extra, **more)
            batch = page.get("items") if isinstance(page, Mapping) else None
            if not isinstance(batch, list):
                raise KubeFailure(f"{what}: the answer is not a list (no items)")
            items.extend(item for item in batch if isinstance(item, Mapping))
            token = dig(page, "metadata", "continue")
            if not isinstance(token, str) or not token:
                return items

    def _found(self, item: Mapping[str, Any], since: datetime, until: datetime, deadline: float) -> Optional[Found]:
        namespace = str(dig(item, "metadata", "namespace") or "")
        name = str(dig(item, "metadata", "name") or "")
        uid = str(dig(item, "metadata", "uid") or "")
        if not (is_dns_label(namespace) and is_dns_subdomain(name) and _UID.fullmatch(uid)):
            return None
        finished = _condition(item, "Finished")
        end = parse_time(str(finished.get("lastTransitionTime") or "")) if finished else None
        if finished is None or finished.get("status") != "True" or end is None or not since <= end <= until:
            return None
        if not _failed(finished):
            return None
        selector, owner_uid = _pod_selector(item)
        try:
            pods = self._pods(namespace, selector, owner_uid, deadline) if selector else []
        except KubeFailure as failure:
            if failure.state == "timeout":
                raise
            pods = []  # pods not readable here (RBAC): the workload is still reported; the connector will say why
        start = _start(item, pods) or end
        nodes = tuple(sorted({n for n in (dig(p, "spec", "nodeName") for p in pods) if isinstance(n, str)
                              and is_dns_subdomain(n)}))
        pod_names = tuple(sorted(str(dig(p, "metadata", "name")) for p in pods))
        job_id = f"{namespace}/{name}"
        user = str(dig(item, "metadata", "labels", self.user_label) or "")
        user = user if _LABEL_VALUE.fullmatch(user) else ""
        workload = Workload(cluster=self.cluster, job_id=job_id, nodes=nodes, user=user,
                            partition=str(dig(item, "spec", "queueName") or ""), kind="kueue", namespace=namespace,
                            name=name, pods=pod_names,
                            args={"kubernetes": {"label_selector": selector}} if selector else {})
        job: dict[str, Any] = {"job_id": job_id, "cluster": self.cluster, "nodes": list(nodes),
                               "start": _iso(start), "end": _iso(end), "state": "FAILED"}
        if pods:
            job["exit_code"] = _exit_code(pods)
        if workload.user:
            job["user"] = workload.user
        if workload.partition and is_dns_subdomain(workload.partition):
            job["partition"] = workload.partition
        return Found(key=f"kueue:{namespace}/{name}:{uid}", workload=workload,
                     window=Window(start, end, self.before, self.after), job=job)

    def _pods(self, namespace: str, selector: str, owner_uid: str, deadline: float) -> list[Mapping[str, Any]]:
        api = kubernetes_module().client.CoreV1Api(self.api_client)
        pods = self._pages(f"list pods of {selector} in {namespace}", api.list_namespaced_pod, (namespace,),
                           deadline, label_selector=selector)
        kept = []
        for pod in pods:
            if not is_dns_subdomain(str(dig(pod, "metadata", "name") or "")):
                continue
            owners = {str(o.get("uid")) for o in dig(pod, "metadata", "ownerReferences") or []
                      if isinstance(o, Mapping) and o.get("controller")}
            if owner_uid and owners and owner_uid not in owners:
                continue  # a pod of another Job of the same name (deleted and recreated)
            kept.append(pod)
        return kept


def _condition(item: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    for cond in dig(item, "status", "conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _failed(finished: Mapping[str, Any]) -> bool:
    """How failure is decided (module docstring): reason Failed, not Succeeded, else the message."""
    reason = str(finished.get("reason") or "")
    if reason in ("Failed", "Succeeded"):
        return reason == "Failed"
    return not _SUCCESS.search(str(finished.get("message") or ""))


def _pod_selector(item: Mapping[str, Any]) -> tuple[str, str]:
    """(label selector, owner uid) of the Workload's controlling owner, or ("", "") for an owner the
    discovery does not know."""
    for owner in dig(item, "metadata", "ownerReferences") or []:
        if not isinstance(owner, Mapping) or not owner.get("controller"):
            continue
        group = str(owner.get("apiVersion") or "").rpartition("/")[0]
        label = OWNER_LABELS.get((group, str(owner.get("kind") or "")))
        name = str(owner.get("name") or "")
        if label and is_dns_subdomain(name) and len(name) <= 63:
            uid = str(owner.get("uid") or "")
            return f"{label}={name}", uid if group == "batch" and _UID.fullmatch(uid) else ""
    return "", ""


def _start(item: Mapping[str, Any], pods: list[Mapping[str, Any]]) -> Optional[datetime]:
    """The earlier of the admission (``Admitted``, else ``QuotaReserved``) and the first pod's start."""
    times = [parse_time(str(dig(p, "status", "startTime") or "")) for p in pods]
    admitted = _condition(item, "Admitted") or _condition(item, "QuotaReserved")
    if admitted is not None and admitted.get("status") == "True":
        times.append(parse_time(str(admitted.get("lastTransitionTime") or "")))
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _exit_code(pods: list[Mapping[str, Any]]) -> str:
    """``"N:S"`` of the first container whose final state is a non-zero exit (by finish time, then pod
    and container); an earlier instance that was restarted did not end the job and counts only when no
    final state failed. ``"0:0"`` when none did."""
    return _first_failure(pods, "state") or _first_failure(pods, "lastState") or "0:0"


def _first_failure(pods: list[Mapping[str, Any]], key: str) -> str:
    failed: list[tuple[datetime, str, str, str]] = []
    for pod in pods:
        for status in _list(pod, "initContainerStatuses") + _list(pod, "containerStatuses"):
            term = dig(status, key, "terminated")
            if not isinstance(term, Mapping) or not isinstance(term.get("exitCode"), int) or not term["exitCode"]:
                continue
            when = parse_time(str(term.get("finishedAt") or "")) or datetime.max.replace(tzinfo=timezone.utc)
            signal = term.get("signal") if isinstance(term.get("signal"), int) else 0
            failed.append((when, str(dig(pod, "metadata", "name")), str(status.get("name")),
                           f"{term['exitCode']}:{signal}"))
    return min(failed)[3] if failed else ""


def _list(pod: Mapping[str, Any], key: str) -> list[Any]:
    value = dig(pod, "status", key)
    return value if isinstance(value, list) else []


def _aware(moment: datetime) -> datetime:
    """A time without a zone is taken as UTC (the API's times all carry one)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

