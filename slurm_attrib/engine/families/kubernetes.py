"""What the kubelet's reasons and messages say about a pod's end (scheduler.k8s_* rules): a container the
kubelet could not find, an eviction for node pressure."""

from __future__ import annotations

import re
from typing import Any

from ...model import Symptom
from ...scan import Line
from ..context import EngineContext
from ..registry import decoder

# pkg/kubelet/eviction/helpers.go: "The node was low on resource: %s. " (then "Threshold quantity: ...,
# available: ..." and "Container %s was using %s, which exceeds its request of %s.")
_LOW_ON = re.compile(r"The node was low on resource: (?P<resource>[\w.-]{1,40})")
_RESOURCE_CATEGORY = {"memory": "host_oom", "ephemeral-storage": "storage", "nodefs": "storage",
                      "imagefs": "storage", "nodefs.inodesfree": "storage", "imagefs.inodesfree": "storage"}
# a volume for /dev/shm by its usual names ('dshm', 'shm', 'dev-shm', 'shared-memory')
_SHM_VOLUME = re.compile(r"(?i)(?:^|[-_.])(?:d|dev-)?shm(?:$|[-_.])|shared[-_]?mem")
# the same file's limit evictions: the pod's own emptyDir over its sizeLimit ("Usage of EmptyDir volume %q
# exceeds the limit %q. "), its ephemeral storage over the containers' limits: the pod's own use, never the node's
_POD_LIMIT = re.compile(r"Usage of EmptyDir volume \"(?P<volume>[^\"\n]{1,253})\" exceeds the limit|"
                        r"(?P<storage>Pod ephemeral local storage usage exceeds the total limit|"
                        r"Container \S{1,253} exceeded its local ephemeral storage limit)")


@decoder("k8s_status_unknown")
def decode_status_unknown(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A container that never ran (its pod terminal before it started: admission refused, evicted) is no
    evidence against the node; one that used to be running keeps the node a suspect."""
    if "could not be located when the pod was terminated" in str(sym.fields.get("message") or ""):
        sym.role, sym.strength = "context", 0
        sym.notes.append("the container never ran: the kubelet reports any such container of a terminal pod "
                         "this way, whatever ended the pod")
    return True


@decoder("k8s_eviction")
def decode_eviction(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The resource a node-pressure eviction names decides the category (memory: host memory; the node's
    disk: storage); a pod over its own limit is the pod's (its /dev/shm emptyDir: host memory; other volumes and
    ephemeral storage: storage); an admission refusal for a node condition ran nothing and is context."""
    text = extra["text"]
    low = _LOW_ON.search(text)
    limit = _POD_LIMIT.search(text) if low is None else None
    if limit is not None:
        # a memory-backed emptyDir is what a pod mounts at /dev/shm ('dshm'): its limit is host memory
        volume = limit.group("volume") or ""
        sym.category = "host_oom" if _SHM_VOLUME.search(volume) else "storage"
        sym.responsible = "workload"
        sym.summary = (f"the kubelet evicted the pod: its emptyDir volume {volume} outgrew its limit" if volume
                       else "the kubelet evicted the pod: its ephemeral storage outgrew its limit")
    elif low is not None:
        resource = low.group("resource").rstrip(".")
        sym.fields["resource"] = resource
        sym.category = _RESOURCE_CATEGORY.get(resource, sym.category)
    elif "The node had condition:" in text:
        sym.role, sym.strength = "context", 0
    return True


# the device plugin saying a device failed inside the kubelet's admission message: NVIDIA's plugin asking NVML (for
# the GPUs' topology: 'unable to get device link information'; 'nvml: GPU is lost'), a device it marked unhealthy
_DEVICE_FAILED = re.compile(r"(?i)GetPreferredAllocation rpc failed|\bnvml\b|GPU is lost|device link information"
                            r"|unhealthy")
_GPU_PLUGIN = re.compile(r"nvidia\.com/|\bnvml\b|\bNVML\b|\bGPU\b|device link information|\bamd\.com/gpu")


@decoder("k8s_admission")
def decode_admission(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The kubelet refused the pod because its device manager could not allocate the devices the scheduler had
    counted on. Where the device plugin says a device failed (NVML failing, a GPU lost or unhealthy), the node's
    device: a GPU plugin's, the GPU's. The device manager's own count ('requested number of devices unavailable
    for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected') also follows a kubelet restart that the
    plugin had not yet re-registered after: context."""
    message = str(sym.fields.get("message") or "")
    if not _DEVICE_FAILED.search(message):
        sym.role, sym.strength = "context", 0
        sym.notes.append("the kubelet's device count fell short: a device gone, or a plugin not yet registered again "
                         "after a kubelet restart")
    elif _GPU_PLUGIN.search(message):
        sym.category = "gpu_hardware"
    return True
