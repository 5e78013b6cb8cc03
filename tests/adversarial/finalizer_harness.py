"""Real finalizer processes for the adversarial suite: a fake Slurm on PATH (shell scripts standing in
for scontrol, sacct and sacctmgr), a configuration with short timings, queue entries as the hooks write
them, and ``slurm-attrib finalize`` run as a subprocess."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

import yaml

SCONTROL = r"""#!/bin/sh
# scontrol --oneliner show job ID: a FAILED job on node-01; anything else: nothing
[ "$3" = job ] || exit 0
echo "JobId=$4 JobName=train UserId=alice($(id -u)) JobState=FAILED Restarts=0 ExitCode=1:0 \
StartTime=2026-12-02T15:40:00 EndTime=2026-12-02T15:41:50 Partition=debug NodeList=node-01 \
WorkDir=/tmp StdErr=${FAKE_STDOUT:-/nonexistent/out} StdIn=/dev/null StdOut=${FAKE_STDOUT:-/nonexistent/out}"
"""
SACCT = r"""#!/bin/sh
# sacct ... -j ID: one FAILED allocation on node-01, in the finalizer's field order (user-controlled
# columns last) and with the --delimiter it asks for; other queries: no rows
d='|'
for a in "$@"; do case "$a" in --jobs=*) job=${a#--jobs=};; --delimiter=*) d=${a#--delimiter=};; esac; done
[ -n "$job" ] || exit 0
row="$job$d$job${d}FAILED${d}1:0${d}0:0${d}node-01${d}alice$d$(id -u)${d}debug${d}c"
printf '%s\n' "$row${d}2026-12-02T15:40:00${d}2026-12-02T15:41:50${d}train${d}/tmp${d}"
"""
SACCTMGR = r"""#!/bin/sh
# sacctmgr: events list empty; modify job succeeds (and is logged for the test to read)
[ "$2" = modify ] && echo "$*" >> "${FAKE_SACCTMGR_LOG:-/dev/null}"
exit 0
"""


def fake_slurm(root: Path) -> Path:
    """A bin directory holding the fake Slurm commands."""
    bin_dir = root / "fakebin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("scontrol", SCONTROL), ("sacct", SACCT), ("sacctmgr", SACCTMGR)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def write_config(root: Path, spool: Path, store: Path, **finalizer: Any) -> Path:
    cfg = {"rules_dir": str(root / "no-site-rules"),
           "spool": {"dir": str(spool), "fallback_dir": str(root / "fallback")},
           "store": {"path": str(store), "busy_timeout_s": 0.2},
           "finalizer": {"backend": "cli", "node_bundle_deadline_s": 0, "sacct_retries": 0,
                         "sacct_retry_delay_s": 0.1, "poll_interval_s": 0.05, "command_timeout_s": 10,
                         **finalizer},
           "remediation": {"state_file": str(root / "remediation.json")}}
    path = root / "slurm-attrib.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def enqueue(spool: Path, job_id: str, cluster: str = "c", restart: str = "0", nodes: str = "node-01",
            name: Optional[str] = None, **extra: str) -> Path:
    """A queue entry as EpilogSlurmctld writes it."""
    env = {"SLURM_SCRIPT_CONTEXT": "epilog_slurmctld", "SLURM_CLUSTER_NAME": cluster, "SLURM_JOB_ID": job_id,
           "SLURM_JOB_RESTART_COUNT": restart, "SLURM_JOB_NODELIST": nodes, "SLURM_JOB_EXIT_CODE2": "1:0",
           "SLURM_JOB_DERIVED_EC": "0", "SLURM_JOB_USER": "alice", "SLURM_JOB_UID": str(os.getuid()),
           "SLURM_JOB_PARTITION": "debug", "SLURM_JOB_NAME": "train", **extra}
    path = spool / "queue" / (name or f"{cluster}_{job_id}_{restart}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hook": "epilog_slurmctld", "enqueued_at": time.time() - 60, "env": env}))
    return path


MEMORY_LIMIT = 3 << 30  # address space of a finalizer under test: poison that balloons fails fast


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


class Site:
    """A spool, a store and a configuration in ``root``, and the environment to run finalizers in."""

    def __init__(self, root: Path, **finalizer: Any) -> None:
        self.root = root
        self.spool = root / "spool"
        self.store = root / "store.sqlite"
        for sub in ("queue", "nodes", "done", "jobs"):
            (self.spool / sub).mkdir(parents=True, exist_ok=True)
        self.config = write_config(root, self.spool, self.store, **finalizer)
        bin_dir = fake_slurm(root)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                    "SLURM_ATTRIB_CONFIG": str(self.config), "SLURM_ATTRIB_WORKERS": "1",
                    "FAKE_SACCTMGR_LOG": str(root / "sacctmgr.log")}
        for name in ("SLURM_ATTRIB_SPOOL", "SLURM_ATTRIB_STORE"):
            self.env.pop(name, None)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "slurm_attrib.cli", *args]

    def finalize(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``slurm-attrib finalize --once`` on this site, to the end."""
        return subprocess.run(self.argv("finalize", "--once", "--spool", str(self.spool), "--store",
                                        str(self.store), *args),
                              env=self.env, capture_output=True, text=True, timeout=timeout,
                              preexec_fn=_limit_memory)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``slurm-attrib finalize`` as a daemon (the caller stops it)."""
        return subprocess.Popen(self.argv("finalize", "--spool", str(self.spool), "--store", str(self.store),
                                          *args),
                                env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_limit_memory)

    def status(self) -> str:
        result = subprocess.run(self.argv("finalize", "--status", "--spool", str(self.spool)), env=self.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def node_bundle(self, key: str, node: str = "node-01", collection: str = "state: ok\n") -> Path:
        folder = self.spool / "nodes" / key / node
        (folder / "syslog").mkdir(parents=True, exist_ok=True)
        (folder / "syslog" / f"{node}.log").write_text("")
        (folder / "collection.yaml").write_text(collection)
        return folder

    def done(self) -> dict[str, dict[str, Any]]:
        return {p.stem: json.loads(p.read_text()) for p in sorted((self.spool / "done").glob("*.json"))
                if p.is_file() and not p.name.startswith(".tmp-")}
