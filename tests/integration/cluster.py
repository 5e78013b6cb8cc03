"""A real single-host Slurm test cluster: munged, MariaDB, slurmdbd, slurmctld and four slurmd
(node-01..node-04, Debian's multiple-slurmd build) under one directory, every daemon started as a
plain background process with its PID recorded, and stopped by those PIDs only.

Facts it rests on: ../shared/research/slurm-minicluster (Slurm 22.05 on Debian 12, as root).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

BINARIES = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct",
            "sacctmgr", "scontrol")
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NODES = ("node-01", "node-02", "node-03", "node-04")


def missing_binaries() -> list[str]:
    path = os.environ.get("PATH", "") + ":" + SAFE_PATH
    return [b for b in BINARIES if shutil.which(b, path=path) is None]


def _free_port_base() -> int:
    """A base port with base..base+20 free on 127.0.0.1."""
    for base in range(26800, 40000, 40):
        if all(_port_free(base + i) for i in range(0, 20)):
            return base
    raise RuntimeError("no free port range for the test cluster")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class Cluster:
    root: Path
    epilog: str
    epilog_ctld: str
    jobcomp: str = ""
    extra_conf: Sequence[str] = ()
    name: str = "attrib"
    port: int = 0
    pids: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # ------------------------------------------------------------------ paths and environment
    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "run" / "munge.socket"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = SAFE_PATH
        env["SLURM_CONF"] = str(self.conf)
        env["SLURM_TEST_TAG"] = str(self.root)  # marker in every daemon's environment
        env.pop("SLURM_TIME_FORMAT", None)
        return env

    def run(self, *argv: str, check: bool = True, timeout: float = 30, user: Optional[str] = None,
            cwd: Optional[str] = None) -> subprocess.CompletedProcess[str]:
        cmd = list(argv)
        if user:
            cmd = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", f"PATH={SAFE_PATH}", *cmd]
        return subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=timeout, check=check,
                              cwd=cwd)

    # ------------------------------------------------------------------ start
    def start(self, timeout: float = 60) -> None:
        self.port = self.port or _free_port_base()
        for sub in ("etc", "run", "log", "state", "spool", "munge", "mysql", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "run", 0o755)
        self.root.chmod(0o755)
        self._munge()
        self._write_conf()
        self._mariadb()
        self._daemon("slurmdbd", ["slurmdbd", "-D"], ready=self._dbd_ready)
        self._daemon("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)], ready=self._ctld_ready)
        for node in NODES:
            (self.root / "spool" / node).mkdir(exist_ok=True)
            self._daemon(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)], ready=None)
        self.wait_nodes_idle(timeout)

    def _munge(self) -> None:
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        subprocess.run(["munged", f"--key-file={key}", f"--socket={self.munge_socket}",
                        f"--pid-file={self.root / 'run' / 'munged.pid'}",
                        f"--log-file={self.root / 'log' / 'munged.log'}",
                        f"--seed-file={self.root / 'munge' / 'seed'}", "--num-threads=2"],
                       env=self.env(), check=True, capture_output=True, timeout=20)
        self.pids["munged"] = int((self.root / "run" / "munged.pid").read_text().strip())
        _wait(lambda: self.munge_socket.exists(), 10, "munged socket")

    def _write_conf(self) -> None:
        d, p = self.root, self.port
        lines = [
            f"ClusterName={self.name}", "SlurmctldHost=localhost(127.0.0.1)", f"SlurmctldPort={p}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}",
            "CredType=cred/munge", "CommunicationParameters=NoInAddrAny", f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n", f"SlurmctldPidFile={d}/run/slurmctld.pidfile",
            f"SlurmdPidFile={d}/run/slurmd-%n.pidfile", f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log", "SlurmctldDebug=info", "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", "MpiDefault=none",
            "SwitchType=switch/none", "ReturnToService=2", "SlurmdParameters=config_overrides", "MailProg=/bin/true",
            "KillWait=5", "OverTimeLimit=0", "SchedulerParameters=batch_sched_delay=0,sched_min_interval=0",
            *([f"Epilog={self.epilog}"] if self.epilog else []),
            *([f"EpilogSlurmctld={self.epilog_ctld}"] if self.epilog_ctld else []),
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
            f"AccountingStoragePort={p + 2}", f"AccountingStoragePass={self.munge_socket}",
            "AccountingStoreFlags=job_comment", *self.extra_conf,
        ]
        if self.jobcomp:
            lines += ["JobCompType=jobcomp/script", f"JobCompLoc={self.jobcomp}"]
        host = socket.gethostname().split(".")[0]
        for i, node in enumerate(NODES, start=1):
            lines.append(f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={p + 10 + i} CPUs=2 "
                         "RealMemory=1000 State=UNKNOWN")
        lines.append(f"PartitionName=debug Nodes=node-[01-0{len(NODES)}] Default=YES MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        dbd = self.root / "etc" / "slurmdbd.conf"
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={p + 2}", "SlurmUser=root", "DebugLevel=info", f"LogFile={d}/log/slurmdbd.log",
            f"PidFile={d}/run/slurmdbd.pidfile", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={p + 3}", "StorageUser=slurm", "StoragePass=slurmpw", "StorageLoc=slurm_acct_db"]) + "\n")
        dbd.chmod(0o600)

    def _mariadb(self) -> None:
        d = self.root
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={d}/mysql", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       env=self.env(), check=True, capture_output=True, timeout=120)
        self._daemon("mariadbd", [
            "mariadbd", "--no-defaults", "--user=root", f"--datadir={d}/mysql", f"--socket={d}/run/mysql.sock",
            f"--port={self.port + 3}", "--bind-address=127.0.0.1", f"--pid-file={d}/run/mysqld.pid",
            f"--log-error={d}/log/mysqld.err", "--skip-name-resolve", "--skip-log-bin",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
            "--innodb-lock-wait-timeout=900", "--innodb-buffer-pool-size=64M"],
            ready=lambda: subprocess.run(["mariadb-admin", "--no-defaults", f"--socket={d}/run/mysql.sock", "-uroot",
                                          "ping"], capture_output=True).returncode == 0)
        sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; "
               "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';")
        subprocess.run(["mariadb", "--no-defaults", f"--socket={d}/run/mysql.sock", "-uroot", "-e", sql],
                       check=True, capture_output=True, timeout=30)

    def _daemon(self, name: str, argv: list[str], ready: Optional[object]) -> None:
        log = open(self.root / "log" / f"{name}.stdout", "ab")  # noqa: SIM115 - closed in stop()
        proc = subprocess.Popen(argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=self.root)
        log.close()
        self.procs[name], self.pids[name] = proc, proc.pid
        if callable(ready):
            _wait(lambda: proc.poll() is None and bool(ready()), 60, name,
                  dead=lambda: proc.poll() is not None, log=self.root / "log" / f"{name}.stdout")

    def _dbd_ready(self) -> bool:
        text = "".join(p.read_text(errors="replace") for p in (self.root / "log").glob("slurmdbd*") if p.is_file())
        return "started" in text

    def _ctld_ready(self) -> bool:
        return "is UP" in self.run("scontrol", "ping", check=False, timeout=10).stdout

    def wait_nodes_idle(self, timeout: float = 60) -> None:
        def idle() -> bool:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False, timeout=10).stdout.split()
            states = dict(zip(out[0::2], out[1::2]))
            return len(states) == len(NODES) and all(s == "idle" for s in states.values())
        _wait(idle, timeout, "all nodes idle")

    # ------------------------------------------------------------------ jobs
    def sbatch(self, *args: str, user: Optional[str] = None, cwd: Optional[str] = None) -> str:
        out = self.run("sbatch", "--parsable", *args, user=user, cwd=cwd or str(self.root / "jobs"))
        return out.stdout.strip().split(";")[0]

    def wait_job_gone(self, job_id: str, timeout: float = 120) -> None:
        _wait(lambda: not self.run("squeue", "-h", "-j", job_id, "-t", "all", check=False).stdout.strip()
              or all(s in ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY")
                     for s in self.run("squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T",
                                       check=False).stdout.split()), timeout, f"job {job_id} to end")

    def sacct(self, job: str, fields: str = "jobid,jobidraw,state,exitcode,admincomment") -> list[list[str]]:
        out = self.run("sacct", "-n", "-P", "-X", "-j", job, "-o", fields, check=False).stdout
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def node_state(self, node: str) -> str:
        return self.run("sinfo", "-h", "-n", node, "-o", "%T", check=False).stdout.strip()

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Cancel jobs, then SIGTERM (and SIGKILL after 15 s) every daemon we started, by PID."""
        if "slurmctld" in self.pids and _alive(self.pids["slurmctld"]):
            jobs = self.run("squeue", "-h", "-o", "%i", check=False, timeout=10).stdout.split()
            if jobs:
                self.run("scancel", *jobs, check=False, timeout=10)
        order = [f"slurmd-{n}" for n in NODES] + ["slurmctld", "slurmdbd", "mariadbd", "munged"]
        for name in order:
            pid = self.pids.get(name)
            if pid and _alive(pid):
                os.kill(pid, signal.SIGTERM)
                _wait(lambda pid=pid: not _alive(pid), 15, f"{name} to stop", soft=True)
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
            proc = self.procs.get(name)
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        self._stop_leftover_stepd()

    def _stop_leftover_stepd(self) -> None:
        marker = f"SLURM_TEST_TAG={self.root}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0") and \
                        (entry / "cmdline").read_bytes().startswith(b"slurmstepd"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait(cond: object, timeout: float, what: str, soft: bool = False, dead: object = None,
          log: Optional[Path] = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(cond) and cond():
            return
        if callable(dead) and dead():
            break
        time.sleep(0.1)
    if soft:
        return
    tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
    raise RuntimeError(f"timed out waiting for {what}\n{tail}")
