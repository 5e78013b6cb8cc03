"""``sweep --connectors``: a failed job whose node bundles were never kept (its node rebooted before the
Epilog ran, or the spool lost them) gets the connectors' evidence over its window, and a verdict that cites it."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from slurm_attrib.connectors.base import FakeSource
from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.slurm.records import AcctRecord
from slurm_attrib.store import Store
from slurm_attrib.store.sweep import sweep
from slurm_attrib.watch.orchestrate import gatherer

END = datetime(2026, 11, 20, 9, 46, tzinfo=timezone.utc)
XID79 = (b"Nov 20 09:45:05 gpu-a02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4411, name=python3, "
         b"GPU has fallen off the bus.\n")


class Sacct:
    def failed_jobs(self, since: datetime, until: datetime) -> list[AcctRecord]:
        return [AcctRecord(job_id="88123", job_id_raw="88123", state="FAILED", exit_code="1:0",
                           nodes=("gpu-a01", "gpu-a02"), cluster="orion", start=END - timedelta(minutes=40), end=END)]


def test_a_job_without_node_bundles_gets_the_connectors_evidence(tmp_path: Path) -> None:
    loki = FakeSource("loki", files={"syslog/gpu-a02.log": XID79})
    quiet = FakeSource("prometheus", state="empty")
    gather = gatherer([loki, quiet], timedelta(minutes=5), timedelta(minutes=1), 5.0, 1 << 20)
    engine = Engine(load_ruleset(include_site=False))
    with Store.open(tmp_path / "s.sqlite") as store:
        (result,) = sweep(store, engine, Sacct(), END - timedelta(hours=1), END + timedelta(hours=1),
                          END + timedelta(hours=1), gather=gather)
        stored = store.find("88123")[0]
    assert result.evidence == "sacct+loki" and result.culprit_nodes == "gpu-a02"
    assert (result.status, result.category) == ("attributed", "gpu_hardware")
    assert loki.calls[0][1].start == END - timedelta(minutes=40)  # the job's own window
    assert stored["state"] == "FAILED"


def test_the_sweep_command_takes_connectors(tmp_path: Path) -> None:
    """The option reaches the command line; with no backend configured every connector says skipped."""
    sacct = tmp_path / "fail.sacct.txt"
    sacct.write_text("JobID|JobIDRaw|State|ExitCode|DerivedExitCode|NodeList|Start|End\n"
                     "5|5|FAILED|1:0|0:0|node-01|2026-11-20T09:00:00|2026-11-20T09:30:00\n")
    config = tmp_path / "c.yaml"
    config.write_text("watch:\n  connectors: [files, loki]\n")
    done = subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "sweep", "--config", str(config), "--connectors",
                           "--sacct-file", str(sacct), "--cluster", "mini", "--since", "30d", "--now",
                           "2026-11-21T00:00:00Z", "--store", str(tmp_path / "s.sqlite"), "--no-site-rules"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "recorded" in done.stdout
