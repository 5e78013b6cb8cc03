"""End to end on the real Slurm test cluster (issue 5 item 4): job end → verdict visible in sacct.

Starts the test cluster of tests/integration (munged, MariaDB, slurmdbd, slurmctld, node-01..04) with the
project's Epilog and controller hook and the finalizer with the DEFAULT configuration (node-bundle
deadline 20 s), runs N failing 2-node jobs one after another (exit 1 with an XID 79 on node-02) and, per
job, measures from the job's end (seen by polling squeue every 50 ms) to:
  baseline: the job's own record in sacct (accounting's lag, what any sacct-based tool waits for);
  verdict:  our AdminComment segment in ``sacct -o admincomment``.
Prints median and max of both and their ratio. Needs root and the Debian Slurm packages.

    .venv/bin/python bench/e2e/run.py [--jobs 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "slurm-attrib/v1:"


def _load_cluster():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("cluster", ROOT / "tests" / "integration" / "cluster.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["cluster"] = module
    spec.loader.exec_module(module)
    return module


def _hooks(root: Path, spool: Path, kern: Path, config: Path) -> tuple[str, str]:
    node = root / "epilog.sh"
    node.write_text(f"""#!/bin/sh
SLURM_ATTRIB_PYTHON={sys.executable} SLURM_ATTRIB_SPOOL={spool} SLURM_ATTRIB_CONFIG={config}
SLURM_ATTRIB_KERNEL_LOG={kern}/{{node}}.log SLURM_ATTRIB_ETC={root}/attrib-etc SLURM_ATTRIB_LOG={root}/epilog.log
export SLURM_ATTRIB_PYTHON SLURM_ATTRIB_SPOOL SLURM_ATTRIB_CONFIG SLURM_ATTRIB_KERNEL_LOG SLURM_ATTRIB_ETC
export SLURM_ATTRIB_LOG
exec {ROOT}/epilog/slurm-attrib-epilog.sh
""")
    node.chmod(0o755)
    text = (ROOT / "etc" / "libexec" / "slurm-attrib-ctld-hook").read_text()
    ctld = root / "ctld-hook"
    ctld.write_text(text.replace("PYTHON=/usr/bin/python3", f"PYTHON={sys.executable}")
                    .replace("SPOOL=/var/spool/slurm-attrib", f"SPOOL={spool}"))
    ctld.chmod(0o755)
    return str(node), str(ctld)


def _job_script(root: Path, kern: Path) -> Path:
    script = root / "fail.sh"
    script.write_text(f"""#!/bin/sh
printf '%s node-02 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus.\\n' \\
    "$(date -u +%Y-%m-%dT%H:%M:%S.%6N+00:00)" >> {kern}/node-02.log
srun -N2 -n2 sh -c 'echo "RuntimeError: NCCL error: remote process exited or there was a network error"'
exit 1
""")
    script.chmod(0o755)
    return script


def measure(cluster, script: Path) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    job = cluster.sbatch("-N2", "-w", "node-01,node-02", "-o", "/dev/null", str(script))
    while cluster.run("squeue", "-h", "-j", job, "-t", "PD,R,CF,S", "-o", "%T", check=False).stdout.strip():
        time.sleep(0.05)
    ended = time.monotonic()
    in_sacct = verdict = 0.0
    while time.monotonic() - ended < 120:
        rows = cluster.sacct(job, "jobid,state,admincomment")
        now = time.monotonic() - ended
        if rows and not in_sacct and rows[0][1] not in ("RUNNING", "PENDING", ""):
            in_sacct = now
        if rows and PREFIX in rows[0][-1]:
            verdict = now
            break
        time.sleep(0.1)
    return in_sacct, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    cluster_mod = _load_cluster()
    missing = cluster_mod.missing_binaries()
    if missing:
        sys.exit(f"needs {', '.join(missing)}")
    root = Path(tempfile.mkdtemp(prefix="slurm-attrib-e2e-", dir="/tmp"))
    root.chmod(0o755)
    spool, kern = root / "spool", root / "kern"
    kern.mkdir()
    config = root / "slurm-attrib.yaml"
    config.write_text(f"spool: {{dir: {spool}}}\nstore: {{path: {root}/store.sqlite}}\n")  # defaults otherwise
    epilog, ctld = _hooks(root, spool, kern, config)
    cluster = cluster_mod.Cluster(root=root / "slurm", epilog=epilog, epilog_ctld=ctld,
                                  extra_conf=["PrologEpilogTimeout=30"])
    fin = None
    try:
        cluster.start()
        env = cluster.env()
        fin = subprocess.Popen([str(Path(sys.executable).parent / "slurm-attrib"), "finalize", "--config", str(config)],
                               env=env, stdout=open(root / "finalizer.log", "ab"), stderr=subprocess.STDOUT,  # noqa: SIM115
                               start_new_session=True)
        script = _job_script(root, kern)
        rows = [measure(cluster, script) for _ in range(args.jobs)]
    finally:
        if fin is not None:
            fin.send_signal(signal.SIGTERM)
            fin.wait(timeout=15)
        cluster.stop()
    base, verdict = [r[0] for r in rows], [r[1] for r in rows]
    missing_verdicts = sum(1 for v in verdict if not v)
    print(f"jobs: {len(rows)} failed 2-node jobs, finalizer defaults (node_bundle_deadline_s=20, poll 1 s)")
    print(f"baseline  job record in sacct   median {statistics.median(base):6.2f} s  max {max(base):6.2f} s")
    print(f"verdict   AdminComment in sacct median {statistics.median(verdict):6.2f} s  max {max(verdict):6.2f} s"
          f"  ({statistics.median(verdict) / max(statistics.median(base), 1e-3):.1f}x the baseline median)")
    print(f"target: median < 15 s -> {'met' if statistics.median(verdict) < 15 and not missing_verdicts else 'MISSED'}"
          f"; jobs without a verdict within 120 s: {missing_verdicts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
