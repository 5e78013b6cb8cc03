"""Controller enqueue hooks: ``EpilogSlurmctld`` (primary) and ``jobcomp/script`` (optional).

Each only writes the hook's whole environment, the hook name and a timestamp as one JSON file into
``<spool>/queue/`` (temp file + rename) and exits 0: slurmctld holds the job in COMPLETING while
EpilogSlurmctld runs and runs jobcomp scripts one at a time without a timeout, so the work is done
later by the finalizer. Standard library only and no package imports beyond this module, so the
interpreter starts and exits in a few tens of milliseconds; run it as ``python3 -s -m
slurm_attrib.hooks HOOK [--spool DIR]`` from the ``/bin/sh`` wrapper ``etc/libexec/slurm-attrib-ctld-hook``.

File names: EpilogSlurmctld → ``<cluster>_<job id>_<restart count>.json`` (the job key the node
bundles use); jobcomp has no restart count in its environment, but the run's start → ``<cluster>_<job
id>_s<START>.jobcomp.json``, so the record of a requeued run and that of the next run are two entries
(the finalizer merges each into its run's entry or resolves the restart count itself).
"""

from __future__ import annotations

import json
import os
import sys
import time

DEFAULT_SPOOL = "/var/spool/slurm-attrib"
HOOKS = ("epilog_slurmctld", "jobcomp")


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text) or "x"


def queue_name(hook: str, env: dict[str, str]) -> str:
    """The queue file name for this hook's environment."""
    if hook == "jobcomp":
        start = env.get("START", "")
        run = f"_s{_safe(start)}" if start.isdigit() else ""
        return f"{_safe(env.get('CLUSTER', ''))}_{_safe(env.get('JOBID', ''))}{run}.jobcomp.json"
    cluster = env.get("SLURM_CLUSTER_NAME", "")
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID", "")
    return f"{_safe(cluster)}_{_safe(job_id)}_{_safe(env.get('SLURM_JOB_RESTART_COUNT', '0'))}.json"


def enqueue(hook: str, env: dict[str, str], spool: str, now: float) -> str:
    """Write the queue entry atomically; returns its path."""
    queue = os.path.join(spool, "queue")
    os.makedirs(queue, mode=0o750, exist_ok=True)
    entry = {"hook": hook, "enqueued_at": now, "env": env}
    final = os.path.join(queue, queue_name(hook, env))
    tmp = os.path.join(queue, f".tmp-{os.getpid()}-{os.path.basename(final)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640)
    with os.fdopen(fd, "w") as handle:
        json.dump(entry, handle, sort_keys=True)
    os.rename(tmp, final)
    return final


def _args(argv: list[str]) -> tuple[str, str]:
    hook, spool = "", os.environ.get("SLURM_ATTRIB_SPOOL", "") or DEFAULT_SPOOL
    i = 0
    while i < len(argv):
        if argv[i] == "--spool" and i + 1 < len(argv):
            spool, i = argv[i + 1], i + 2
            continue
        hook, i = argv[i], i + 1
    return hook, spool


def detect_hook(env: dict[str, str]) -> str:
    """Which hook we are from the environment: EpilogSlurmctld sets SLURM_SCRIPT_CONTEXT, jobcomp JOBSTATE."""
    if env.get("SLURM_SCRIPT_CONTEXT") == "epilog_slurmctld":
        return "epilog_slurmctld"
    return "jobcomp" if "JOBSTATE" in env else ""


def main(argv: list[str] | None = None) -> int:
    """Enqueue and exit 0 whatever happens (a failure is logged to stderr, never to Slurm)."""
    hook, spool = _args(list(sys.argv[1:] if argv is None else argv))
    env = dict(os.environ)
    hook = hook if hook in HOOKS else detect_hook(env)
    try:
        if not hook:
            raise ValueError("cannot tell the hook (pass epilog_slurmctld or jobcomp)")
        enqueue(hook, env, spool, time.time())
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"slurm-attrib hook: not enqueued: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
