"""Slurm job state names, and the named sets every state table of the package uses.

One vocabulary, so that the finalizer, the backfill sweep, the node history query and the engine
agree on what "ended", "failed" and "requeued" mean. The names are Slurm's own, from
``job_state_string()`` and ``job_state_string_complete()`` in src/common/slurm_protocol_defs.c
(https://github.com/SchedMD/slurm/blob/master/src/common/slurm_protocol_defs.c). Standard library
only and no package imports: the engine and the node collector import it.
"""

from __future__ import annotations

BASE_STATES = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
               "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")  # enum job_states, in its order
# A set flag replaces the base state in job_state_string() (scontrol's JobState=COMPLETING); the last
# three are printed only by job_state_string_complete(), after a comma ("FAILED,LAUNCH_FAILED").
FLAG_STATES = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "EXPEDITING", "RESIZING", "REQUEUED", "REQUEUE_FED",
               "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING",
               "LAUNCH_FAILED", "POWER_UP_NODE", "RECONFIG_FAIL")
JOB_STATES = BASE_STATES + FLAG_STATES

# Ends that may say something about a node's health: another job's on the same node is worth showing.
# CANCELLED, PREEMPTED and DEADLINE are decisions of a user or the scheduler, not symptoms.
HISTORY_STATES = ("FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL")
# Every end but success: what the backfill sweep diagnoses and what a failed step is.
FAILED_STATES = (*HISTORY_STATES, "CANCELLED", "PREEMPTED", "DEADLINE")
# The base states a job can end in (enum values from JOB_COMPLETE on): they say how it ended.
TERMINAL_STATES = ("COMPLETED", *FAILED_STATES)
# Back in the queue rather than ended: the job will run again under a higher restart count.
REQUEUED_STATES = ("PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD")


def normalise(text: str) -> str:
    """The state name in any form Slurm prints it: 'CANCELLED by 1234' (sacct), 'CANCELLED+' (sacct's
    fixed-width columns cut long values and mark the cut with '+'), 'FAILED,LAUNCH_FAILED'
    (job_state_string_complete), 'failed' (typed by hand) → the name alone, upper-case; '' for none."""
    words = (text or "").strip().upper().split(maxsplit=1)
    return words[0].split("+", 1)[0].split(",", 1)[0] if words else ""
