"""Session fixture: a real Slurm cluster (node-01..04) running the project's node Epilog and
EpilogSlurmctld hook, plus the finalizer as a background process. Started once per session, stopped
by PID at the end. Skipped only when the Slurm/munge/MariaDB binaries are absent (``.ci/run`` installs
them)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cluster import Cluster, missing_binaries

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
TEST_USER = "sattrib-test"
DEADLINE_S = 8  # node-bundle deadline for the tests (the default, 20 s, is measured in bench/e2e)


@dataclass
class Env:
    cluster: Cluster
    root: Path
    spool: Path
    store: Path
    kern: Path
    user: str
    config: Path

    def kernel_log(self, node: str, line: str) -> None:
        with open(self.kern / f"{node}.log", "a") as handle:
            handle.write(line.rstrip("\n") + "\n")

    def hang_collector(self, job_id: str) -> None:
        (self.root / "hang" / job_id).touch()


def _write(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _hooks(root: Path, spool: Path, kern: Path, config: Path) -> tuple[str, str]:
    epilog = ROOT / "epilog" / "slurm-attrib-epilog.sh"
    hang = _write(root / "hooks" / "hang-python", f"""#!/bin/sh
# stands in for a collector that began its node bundle and then hung
d="{spool}/nodes/${{SLURM_CLUSTER_NAME}}_${{SLURM_JOB_ID}}_${{SLURM_JOB_RESTART_COUNT:-0}}/.tmp-${{SLURMD_NODENAME}}-$$"
mkdir -p "$d"
exec /bin/sleep 600
""")
    node = _write(root / "hooks" / "epilog.sh", f"""#!/bin/sh
# test wrapper: slurmd passes no custom environment, so the emulation knobs are set here, then the
# project's Epilog runs unchanged
SLURM_ATTRIB_ETC={root}/attrib-etc
SLURM_ATTRIB_PYTHON={PYTHON}
SLURM_ATTRIB_SPOOL={spool}
SLURM_ATTRIB_CONFIG={config}
SLURM_ATTRIB_KERNEL_LOG={kern}/{{node}}.log
SLURM_ATTRIB_LOG={root}/log/epilog-attrib.log
SLURM_ATTRIB_BUDGET=3
if [ -e "{root}/hang/$SLURM_JOB_ID" ]; then SLURM_ATTRIB_PYTHON={hang}; fi
export SLURM_ATTRIB_ETC SLURM_ATTRIB_PYTHON SLURM_ATTRIB_SPOOL SLURM_ATTRIB_CONFIG SLURM_ATTRIB_KERNEL_LOG
export SLURM_ATTRIB_LOG SLURM_ATTRIB_BUDGET
exec {epilog}
""")
    template = (ROOT / "etc" / "libexec" / "slurm-attrib-ctld-hook").read_text()
    ctld_text = template.replace("PYTHON=/usr/bin/python3", f"PYTHON={PYTHON}") \
        .replace("SPOOL=/var/spool/slurm-attrib", f"SPOOL={spool}")
    ctld = _write(root / "hooks" / "ctld-hook", ctld_text)
    return str(node), str(ctld)


def _config(root: Path, spool: Path, store: Path) -> Path:
    return _write(root / "etc" / "slurm-attrib.yaml", f"""
spool: {{dir: {spool}}}
store: {{path: {store}}}
finalizer:
  node_bundle_deadline_s: {DEADLINE_S}
  poll_interval_s: 0.2
  sacct_retries: 10
  sacct_retry_delay_s: 1
  admin_comment_retry_s: 60
remediation:
  drain: true
  dry_run: false
  max_nodes_per_hour: 1
  max_partition_percent: 50
  state_file: {root}/remediation.json
""", 0o644)


def _ensure_user() -> bool:
    try:
        pwd.getpwnam(TEST_USER)
        return False
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", TEST_USER], check=True, capture_output=True)
        return True


@pytest.fixture(scope="session")
def slurm_env() -> Iterator[Env]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm test cluster needs {', '.join(missing)} (Debian: slurmctld slurmd slurmdbd slurm-client "
                    "munge mariadb-server; .ci/run installs them)")
    root = Path(tempfile.mkdtemp(prefix="slurm-attrib-test-", dir="/tmp"))
    root.chmod(0o755)
    spool, kern, store = root / "spool-attrib", root / "kern", root / "store.sqlite"
    for d in (spool, kern, root / "hang", root / "attrib-etc", root / "log", root / "userjobs"):
        d.mkdir(parents=True, exist_ok=True)
    kern.chmod(0o777)
    created = _ensure_user()
    user = pwd.getpwnam(TEST_USER)
    os.chown(root / "userjobs", user.pw_uid, user.pw_gid)
    config = _config(root, spool, store)
    epilog, ctld = _hooks(root, spool, kern, config)
    cluster = Cluster(root=root / "slurm", epilog=epilog, epilog_ctld=ctld,
                      extra_conf=["PrologEpilogTimeout=30", "MinJobAge=600"])
    finalizer = None
    try:
        cluster.start()
        env = cluster.env()
        env["SLURM_ATTRIB_CONFIG"] = str(config)
        log = open(root / "log" / "finalizer.log", "ab")  # noqa: SIM115 - closed below
        finalizer = subprocess.Popen([str(Path(PYTHON).parent / "slurm-attrib"), "finalize", "-v", "--config",
                                      str(config)], env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        yield Env(cluster, root, spool, store, kern, TEST_USER, config)
    finally:
        if finalizer is not None and finalizer.poll() is None:
            finalizer.send_signal(signal.SIGTERM)
            try:
                finalizer.wait(timeout=10)
            except subprocess.TimeoutExpired:
                finalizer.kill()
        cluster.stop()
        if created:
            subprocess.run(["userdel", TEST_USER], capture_output=True)
        if os.environ.get("SLURM_ATTRIB_KEEP_TEST_CLUSTER") != "1":
            shutil.rmtree(root, ignore_errors=True)


def wait_for(cond, timeout: float, what: str, interval: float = 0.3):  # type: ignore[no-untyped-def]
    """Poll ``cond`` until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
