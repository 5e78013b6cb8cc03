"""Loading an evidence bundle (DESIGN.md §3): job facts, node facts and the list of evidence files.

Loading never fails on content: a missing or broken job.yaml, an unreadable file or a planted
symlink becomes a *problem* recorded for the coverage report. Only a bundle path that is not a
directory raises :class:`BundleError`. File contents are not read here; see :mod:`.scan`.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Optional

import yaml

from . import safeyaml
from .errors import BundleError
from .model import SOURCE_APP, SOURCE_DIAG, SOURCE_KERNEL, SOURCE_METRICS, SOURCE_SCHEDULER, JobFacts, Step
from .safeio import read_regular
from .slurm import hostlist, states
from .slurm.errors import SlurmParseError
from .timestamps import iso_offset, parse_iso

JOB_FILE = "job.yaml"
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: job.yaml of 4,096 ranks
_ARRAY_JOB_ID = re.compile(r"^[0-9]+_[0-9]+$")
_SEXAGESIMAL = re.compile(r"^[0-9]+(?::[0-9]+)+(?:\.[0-9]*)?$")
# YAML 1.1 reads an unquoted array job id, `job_id: 1234_5`, as the integer 12345: another job; and an
# unquoted Slurm exit code, `exit_code: 1:0`, as the base-60 number 60 (YAML 1.2 dropped base 60). The
# job.yaml loader reads those forms as the strings they are (checked before the int and float resolvers).
_AS_TEXT = [("tag:yaml.org,2002:str", _ARRAY_JOB_ID), ("tag:yaml.org,2002:str", _SEXAGESIMAL)]
_JOB_LOADER = type("_JobLoader", (_SAFE_LOADER,), {"yaml_implicit_resolvers": {
    first: [*(_AS_TEXT if first.isdigit() else []), *resolvers]
    for first, resolvers in _SAFE_LOADER.yaml_implicit_resolvers.items()}})
MAX_YAML_BYTES = 4 * 1024 * 1024
SOURCE_DIRS = {
    "syslog": SOURCE_KERNEL,
    "applog": SOURCE_APP,
    "metrics": SOURCE_METRICS,
    "diag": SOURCE_DIAG,
    "sacct": SOURCE_SCHEDULER,
}


@dataclass(frozen=True)
class NodeFacts:
    """facts/NODE.yaml: what resolves uptimes and selects decode branches."""

    node: str
    boot_time: Optional[datetime] = None
    driver_version: Optional[str] = None
    timezone: Optional[str] = None
    gpus: tuple[tuple[str, str, int], ...] = ()  # (pci, uuid, index)
    hostname: Optional[str] = None  # the node's own name for itself (uname -n) where Slurm's NodeName differs

    def uuid_for(self, pci: str) -> Optional[str]:
        for gpu_pci, uuid, _ in self.gpus:
            if gpu_pci == pci:
                return uuid
        return None


@dataclass(frozen=True)
class BundleFile:
    """One evidence file: its path relative to the bundle, source kind and node (if it names one)."""

    rel: str
    path: Path
    source: str
    node: Optional[str]
    size: int


@dataclass
class Bundle:
    root: Path
    job: JobFacts
    files: list[BundleFile]
    node_facts: dict[str, NodeFacts]
    problems: list[str] = field(default_factory=list)
    kernel_origins: dict[str, str] = field(default_factory=dict)  # node -> KERNEL_ORIGIN_* (collection/NODE.yaml)
    kernel_complete: frozenset[str] = frozenset()  # nodes whose collection record says the kernel log's state was ok
    # nodes whose kernel log window was read to its end, or found empty, and not cut (no KERNEL_LOG_CUT in its reason)
    kernel_uncut: frozenset[str] = frozenset()
    clock_skews: dict[str, float] = field(default_factory=dict)  # node -> s its clock was behind (negative)
    # node -> the GPUs Slurm gave the job there, as the epilog read SLURM_JOB_GPUS (indexes) or
    # CUDA_VISIBLE_DEVICES (indexes or UUIDs) into collection/NODE.yaml's ``gpus``
    job_gpus: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def allocated_gpus(self, node: Optional[str]) -> Optional[frozenset[str]]:
        """The PCI addresses of the GPUs the job had on ``node``, through its facts' GPU list by UUID; None when the
        collection record or the facts cannot tell (an index, a GPU the facts do not list)."""
        wanted = self.job_gpus.get(node) if node else None
        facts = self.facts_for(node)
        if not wanted or facts is None or not facts.gpus or not all(w.startswith("GPU-") for w in wanted):
            # Slurm's gres indexes follow the device files or MIG slices, not nvidia-smi's order in the facts:
            # only UUIDs name a GPU for certain
            return None
        by_uuid = {uuid: pci for pci, uuid, _ in facts.gpus}
        found = {by_uuid.get(name) for name in wanted}
        return None if None in found else frozenset(pci for pci in found if pci)

    def allocated_by_index(self, node: Optional[str]) -> Optional[frozenset[str]]:
        """The PCI addresses of the GPUs the collection record names by index for ``node`` (SLURM_JOB_GPUS), read
        through the facts' nvidia-smi indexes: Slurm's indexes follow the device files, which nvidia-smi's order
        matches on most nodes but not all, so a likely set, never a certain one; None where the record names them
        otherwise or the facts do not list every index."""
        wanted = self.job_gpus.get(node) if node else None
        facts = self.facts_for(node)
        if not wanted or facts is None or not facts.gpus or not all(w.isdecimal() for w in wanted):
            return None
        by_index = {index: pci for pci, _, index in facts.gpus}
        found = {by_index.get(int(w)) for w in wanted}
        return None if None in found else frozenset(pci for pci in found if pci)

    def facts_for(self, node: Optional[str]) -> Optional[NodeFacts]:
        return self.node_facts.get(node) if node else None

    @cached_property
    def nodes_zone(self) -> str:
        """The zone every job node's facts that name one agree on, or "" (none named, or two different): once
        per bundle, which every file's time context asks."""
        nodes = self.job.node_set
        zones = {f.timezone for n, f in self.node_facts.items() if f.timezone and n in nodes}
        return zones.pop() if len(zones) == 1 else ""

    @cached_property
    def _nodes_by_hostname(self) -> dict[str, str]:
        """The job's nodes by the host name their facts record (lower case; whole, and its first label), where it
        is not a job node's name, no other node's name or facts share it, and it names a machine (a NodeName that
        is not the host name: 'queue1-st-p4d-1' on host 'ip-10-0-1-23')."""
        nodes = self.job.node_set
        taken = {node.lower() for node in nodes} | {node.split(".", 1)[0].lower() for node in nodes}
        seen: dict[str, set[str]] = {}
        for node, facts in sorted(self.node_facts.items()):
            host = (facts.hostname or "").lower()
            if node not in nodes or not host or host.split(".", 1)[0] in _ANONYMOUS_HOSTS:
                continue
            for name in {host, host.split(".", 1)[0]}:
                seen.setdefault(name, set()).add(node)
        return {name: min(owners) for name, owners in seen.items() if len(owners) == 1 and name not in taken}

    def node_for_hostname(self, name: str) -> Optional[str]:
        """The job node whose facts record ``name`` as its host name: the whole name, or its first label when
        ``name`` has no domain."""
        return self._nodes_by_hostname.get(name.lower()) if name else None

    def kernel_origin(self, node: Optional[str]) -> str:
        """Where the collector took ``node``'s kernel log from (:data:`KERNEL_ORIGINS`); ``""`` when the
        bundle holds no collection record for it (a bundle made by hand), ``"unrecorded"`` when the record
        predates origins (a collector that may have read a mixed syslog file)."""
        return self.kernel_origins.get(node, "") if node else ""


# host names that name no one machine ('localhost' in a container, a loghost's relayed line without its origin)
_ANONYMOUS_HOSTS = frozenset({"localhost", "localhost4", "localhost6", "localdomain", "(none)", "-"})


def load_bundle(path: str | os.PathLike[str]) -> Bundle:
    """Read ``path`` as an evidence bundle. Raises BundleError only if it is not a directory."""
    root = Path(path)
    if not root.is_dir():
        raise BundleError(f"{root}: not a bundle directory (expected a folder with job.yaml)")
    problems: list[str] = []
    raw = _read_yaml(root / JOB_FILE, problems)
    job = job_from_mapping(raw if isinstance(raw, dict) else {}, problems)
    if raw is not None and not isinstance(raw, dict):
        problems.append(f"{JOB_FILE}: expected a mapping, got {type(raw).__name__}")
    node_facts = _load_node_facts(root, problems)
    files = _list_files(root, job, problems)
    origins, skews, gpus, complete, uncut = _load_collection_records(root, problems)
    return Bundle(root=root, job=job, files=files, node_facts=node_facts, problems=problems,
                  kernel_origins=origins, kernel_complete=complete, kernel_uncut=uncut, clock_skews=skews,
                  job_gpus=gpus)


# Where a node's kernel log came from, as the collector records it (collection.yaml, source kernel_log).
# The journal's kernel transport (`journalctl -k`) and the ring buffer hold only what the kernel (or root, through
# /dev/kmsg) wrote. A syslog file holds what syslog was sent: a mixed one (/var/log/messages, /var/log/syslog) any
# local program's lines, and even a kern-facility file (kern.log) a program's that wrote its own priority to
# /dev/log ('<3>kernel: NVRM: Xid ...': rsyslog's imuxsock takes the facility as sent; only logger(1) and glibc's
# syslog() refuse LOG_KERN), so their kernel-looking lines are unverified; so are those of a log `watch` read from
# a log shipper or a file named in an inventory (`shipped`): nothing says who wrote them.
# A file the configuration names as the node's kernel log (`configured`) is trusted as the configuration says.
KERNEL_ORIGINS = ("journald", "dmesg", "configured", "kern-file", "mixed-file", "shipped")
# what the node collector adds to a kernel log's reason when the window was larger than its cap and only the tail kept
# (connectors/kernel_log.py's KERNEL_LOG_CUT; a test holds the two the same)
KERNEL_LOG_CUT = "window larger than the cap, tail kept"
TRUSTED_KERNEL_ORIGINS = ("journald", "dmesg", "configured")


def shipped_kernel_record(node: str) -> dict[str, Any]:
    """collection/NODE.yaml for a node whose kernel log a connector brought from a shipper or a file
    (``watch``, the finalizer's gap connectors): origin ``shipped``, so its lines are never trusted as the
    kernel's own."""
    return {"node": node, "sources": [{"source": "kernel_log", "state": "ok", "origin": "shipped"}]}


def _load_collection_records(root: Path, problems: list[str]
                             ) -> tuple[dict[str, str], dict[str, float], dict[str, tuple[str, ...]], frozenset[str],
                                        frozenset[str]]:
    """collection/NODE.yaml (the node bundle's collection.yaml, copied by the finalizer) → the origin of
    that node's kernel log (a record without one says ``unrecorded``), how far its clock was behind
    the controller's at the Epilog (``clock_skew_s``, when the collector could tell) and the GPUs the job had
    there (``gpus``: SLURM_JOB_GPUS, '0,1' or '0-3', or CUDA_VISIBLE_DEVICES' indexes or UUIDs), the nodes whose
    kernel log the collector read whole (its state ``ok``), and the nodes whose window it read to the end or found
    empty and did not cut (no :data:`KERNEL_LOG_CUT` in its reason: the reason also says which sources it tried
    first, 'journalctl: no kernel lines in the window; ... read /var/log/messages', which cuts nothing)."""
    origins: dict[str, str] = {}
    skews: dict[str, float] = {}
    gpus: dict[str, tuple[str, ...]] = {}
    complete: set[str] = set()
    uncut: set[str] = set()
    folder = root / "collection"
    if not folder.is_dir() or folder.is_symlink():
        return origins, skews, gpus, frozenset(), frozenset()
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".yaml", ".yml"):
            continue
        raw = _read_yaml(path, problems)
        skew = raw.get("clock_skew_s") if isinstance(raw, dict) else None
        if isinstance(skew, (int, float)) and not isinstance(skew, bool) and -86400 * 365 < skew < 0:
            skews[path.stem] = float(skew)
        sources = raw.get("sources") if isinstance(raw, dict) else None
        origin = "unrecorded"
        for entry in sources if isinstance(sources, list) else ():
            if isinstance(entry, dict) and entry.get("source") == "kernel_log":
                value = _text(entry.get("origin"))
                origin = value if value in KERNEL_ORIGINS else "unrecorded"
                if entry.get("state") == "ok":
                    complete.add(path.stem)
                if entry.get("state") in ("ok", "empty") and KERNEL_LOG_CUT not in _text(entry.get("reason")):
                    uncut.add(path.stem)
        origins[path.stem] = origin
        named = _gpu_list(raw.get("gpus") if isinstance(raw, dict) else None)
        if named:
            gpus[path.stem] = named
    return origins, skews, gpus, frozenset(complete), frozenset(uncut)


def _gpu_list(value: Any) -> tuple[str, ...]:
    """'0,1', '0-3', 'GPU-1b2c...,GPU-3d4e...' (or a list of them) → the names, ranges expanded; () for anything
    else, so a record the engine cannot read restricts nothing."""
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, (str, int)) else []
    names: list[str] = []
    for item in (str(i).strip() for i in items):
        low, dash, high = item.partition("-")
        if dash and low.isdecimal() and high.isdecimal() and int(low) <= int(high) <= int(low) + 1024:
            names.extend(str(n) for n in range(int(low), int(high) + 1))
        elif item.isdecimal() or (item.startswith(("GPU-", "MIG-")) and len(item) <= 80):
            names.append(item)
        elif item:
            return ()
    return tuple(names)


def _read_yaml(path: Path, problems: list[str]) -> Any:
    if not path.exists() and not path.is_symlink():
        problems.append(f"{path.name}: missing")
        return None
    try:
        data = read_regular(path, MAX_YAML_BYTES)
        return safeyaml.load(data.decode("utf-8", errors="replace"), loader=_JOB_LOADER)
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: unreadable ({exc})")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problems.append(f"{path.name}{where}: invalid YAML ({getattr(exc, 'problem', exc)})")
    return None



def job_from_mapping(raw: dict[str, Any], problems: list[str]) -> JobFacts:
    """Normalise a job.yaml mapping into JobFacts; bad values become problems, not exceptions."""
    nodes = _str_list(raw.get("nodes"), "nodes", problems)
    collection = raw.get("collection") if isinstance(raw.get("collection"), dict) else {}
    bundles = collection.get("node_bundles") if isinstance(collection, dict) else None
    zone, zone_source = _job_zone(raw)
    return JobFacts(
        job_id=_text(raw.get("job_id")) or "unknown",
        cluster=_text(raw.get("cluster")),
        user=_text(raw.get("user")),
        partition=_text(raw.get("partition")),
        nodes=tuple(nodes),
        start=_time(raw.get("start"), "start", problems),
        end=_time(raw.get("end"), "end", problems),
        state=states.normalise(_text(raw.get("state"))),
        exit_code=_text(raw.get("exit_code")) or "0:0",
        derived_exit_code=_text(raw.get("derived_exit_code")) or "0:0",
        ranks=_ranks(raw.get("ranks"), problems),
        steps=_steps(raw.get("steps"), problems),
        addresses=_addresses(raw.get("addresses"), problems),
        node_bundles=tuple(sorted((str(k), _text(v)) for k, v in bundles.items()))
        if isinstance(bundles, dict) else (),
        timezone=zone,
        timezone_source=zone_source,
        gpus_per_node=_int(raw.get("gpus_per_node"), 0) or None,
        restart_count=_int(raw.get("restart_count"), 0),
        array_job_id=_text(raw.get("array_job_id")),
        array_task_id=_text(raw.get("array_task_id")),
        collection_sources=_sources(collection.get("sources") if isinstance(collection, dict) else None, problems),
    )


def _sources(value: Any, problems: list[str]) -> tuple[tuple[str, str, str, int, str], ...]:
    """job.yaml ``collection.sources``: what each connector of ``watch`` got, for the coverage report."""
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append("job.yaml: collection.sources is not a list; ignored")
        return ()
    out = []
    for entry in value:
        if isinstance(entry, dict) and _text(entry.get("source")):
            out.append((_text(entry.get("source")), _text(entry.get("state")) or "error", _text(entry.get("reason")),
                        _int(entry.get("bytes"), 0), _text(entry.get("query"))))
    return tuple(sorted(out))


def _job_zone(raw: dict[str, Any]) -> tuple[str, str]:
    """The zone for stamps without an offset, and where it came from: job.yaml's ``timezone``, else the
    offset written in the job's ``start``/``end`` (sacct and the hooks print local time with it), else UTC."""
    named = _text(raw.get("timezone"))
    if named:
        return named, "job.yaml timezone"
    for key in ("start", "end"):
        value = raw.get(key)
        text = value.isoformat() if isinstance(value, datetime) and value.tzinfo else _text(value)
        offset = iso_offset(text)
        if offset:
            return ("UTC" if offset in ("Z", "z") else offset), f"the offset of the job's {key} time"
    return "UTC", "default"


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _str_list(value: Any, key: str, problems: list[str]) -> list[str]:
    """A list of names, or one string of them: comma-separated, or a Slurm hostlist as sacct and
    SLURM_JOB_NODELIST print it (``worker[3-4,6]``), which is expanded, in a string or a list item."""
    if value is None:
        return []
    if isinstance(value, str):
        return _hostnames(value, key, problems)
    if isinstance(value, list):
        return [name for v in value for name in (_hostnames(str(v), key, problems) if "[" in str(v) else [str(v)])]
    problems.append(f"{JOB_FILE}: {key}: expected a list")
    return []


def _hostnames(text: str, key: str, problems: list[str]) -> list[str]:
    if "[" in text:
        try:
            return hostlist.expand(text)
        except SlurmParseError as exc:
            problems.append(f"{JOB_FILE}: {key}: {exc}")
    return [v for v in (p.strip() for p in text.split(",")) if v]


def _time(value: Any, key: str, problems: list[str]) -> Optional[datetime]:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        value = value.isoformat()
    parsed = parse_iso(str(value))
    if parsed is None:
        problems.append(f"{JOB_FILE}: {key}: not an ISO 8601 time: {value!r}")
    return parsed


def _ranks(value: Any, problems: list[str]) -> tuple[tuple[int, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        problems.append(f"{JOB_FILE}: ranks: expected a mapping rank -> node")
        return ()
    out: list[tuple[int, str]] = []
    for key, node in value.items():
        if isinstance(node, list):  # node -> [ranks]
            out.extend((_int(r, -1), str(key)) for r in node)
        else:
            out.append((_int(key, -1), str(node)))
    bad = [r for r, _ in out if r < 0]
    if bad:
        problems.append(f"{JOB_FILE}: ranks: {len(bad)} entries without a rank number")
    return tuple(sorted(p for p in out if p[0] >= 0))


def _steps(value: Any, problems: list[str]) -> tuple[Step, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(f"{JOB_FILE}: steps: expected a list")
        return ()
    steps = []
    for item in value:
        if isinstance(item, dict):
            steps.append(Step(id=_text(item.get("id")), state=states.normalise(_text(item.get("state"))),
                              exit_code=_text(item.get("exit_code")) or "0:0",
                              nodes=tuple(_str_list(item.get("nodes"), "steps.nodes", problems))))
    return tuple(steps)


def _addresses(value: Any, problems: list[str]) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        problems.append(f"{JOB_FILE}: addresses: expected a mapping node -> [addresses]")
        return ()
    pairs = []
    for node, addrs in value.items():
        for addr in addrs if isinstance(addrs, list) else [addrs]:
            pairs.append((str(addr), str(node)))
    return tuple(sorted(pairs))


def _load_node_facts(root: Path, problems: list[str]) -> dict[str, NodeFacts]:
    facts: dict[str, NodeFacts] = {}
    folder = root / "facts"
    if not folder.is_dir():
        return facts
    for path in sorted(folder.iterdir()):
        if path.suffix not in (".yaml", ".yml", ".json"):
            continue
        raw = _read_yaml(path, problems)
        if not isinstance(raw, dict):
            continue
        node = path.stem
        facts[node] = NodeFacts(
            node=node,
            boot_time=_time(raw.get("boot_time"), f"facts/{path.name}: boot_time", problems),
            driver_version=_text(raw.get("driver_version")) or None,
            timezone=_text(raw.get("timezone")) or None,
            gpus=_gpus(raw.get("gpus"), f"facts/{path.name}", problems),
            hostname=_text(raw.get("hostname")) or None,
        )
    return facts


def _gpus(value: Any, where: str, problems: list[str]) -> tuple[tuple[str, str, int], ...]:
    from .nvidia.parse import normalise_pci

    if not isinstance(value, list):
        return ()
    out = []
    for i, gpu in enumerate(value):
        if isinstance(gpu, dict) and gpu.get("pci"):
            try:
                pci = normalise_pci(str(gpu["pci"]))
            except ValueError as exc:
                problems.append(f"{where}: gpus[{i}]: {exc}; skipped")
                continue
            out.append((pci, _text(gpu.get("uuid")), _int(gpu.get("index"), i)))
    return tuple(sorted(out))


def _list_files(root: Path, job: JobFacts, problems: list[str]) -> list[BundleFile]:
    files: list[BundleFile] = []
    for folder, source in sorted(SOURCE_DIRS.items()):
        base = root / folder
        if base.is_symlink():
            problems.append(f"{folder}/: is a symbolic link; skipped")
            continue
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                rel = path.relative_to(root).as_posix()
                entry = _bundle_file(path, rel, source, job, problems)
                if entry:
                    files.append(entry)
    files.sort(key=lambda f: f.rel)
    return files


def _bundle_file(path: Path, rel: str, source: str, job: JobFacts,
                 problems: list[str]) -> Optional[BundleFile]:
    try:
        st = path.lstat()
    except OSError as exc:
        problems.append(f"{rel}: cannot stat ({exc.strerror})")
        return None
    if stat.S_ISLNK(st.st_mode):
        problems.append(f"{rel}: symbolic link; not followed")
        return None
    if not stat.S_ISREG(st.st_mode):
        problems.append(f"{rel}: not a regular file; skipped")
        return None
    return BundleFile(rel=rel, path=path, source=source, node=_node_of(path, job, rel), size=st.st_size)


# logrotate's names for older files: a number, or with dateext the date, after the extension
_ROTATED = re.compile(r"(\.log|\.txt)(?:\.\d{1,3}|-\d{8})(\.gz)?$")


def _node_of(path: Path, job: JobFacts, rel: str = "") -> Optional[str]:
    """syslog/node-02.log → node-02 (node-02.log.1, node-02.log.2.gz and node-02.log-20261120 too: rotated),
    metrics/node-02.promql.log → node-02. A name outside the job's node
    list still names a node (the filter phase decides what to do with it); an applog not named for a node
    has none. An application log in a folder named for a job node is that node's, whatever the file is called
    (torchrun --log-dir's applog/gpu-k02/<run>/attempt_0/1/stderr.log, Open MPI --output-filename's
    applog/gpu-k02/1/rank.5/stderr)."""
    parts = rel.split("/")
    if len(parts) > 2 and parts[0] == "applog":
        folder = next((part for part in parts[1:-1] if part in job.node_set), None)
        if folder is not None:
            return folder
    name = _ROTATED.sub(r"\1\2", path.name)  # node-02.log.1, node-02.log.2.gz, node-02.log-20261120
    for suffix in (".gz", ".log", ".txt", ".prom", ".json", ".xml", ".out", ".err"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if path.parent.name == "metrics" and name.endswith(".promql"):  # the Prometheus connector's findings
        name = name[: -len(".promql")]
    if path.parent.name == "applog" and name not in job.node_set:
        return None
    return name or None
