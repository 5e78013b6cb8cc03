"""Slurm's own evidence: the scheduler rules that read the job's state and its failed steps (job.yaml,
sacct output), and the decoders for srun / slurmstepd step errors (whose fault a launch failure is)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from ...model import RAW_LINE_CAP, EvidenceRef, Symptom
from ...ruleset import Rule
from ...scan import EVIDENCE_READ_ERRORS, Line, open_evidence
from ...slurm.parse import parsable_rows
from ...slurm.states import FAILED_STATES, normalise
from ..context import EngineContext
from ..nodes import job_node
from ..registry import decoder, rule
from ..timeinfer import latest_time, next_time, time_context

# Reasons slurmd gives (slurm_errno.c's ESLURMD_* texts and errno strings) for a task launch that the job
# itself caused: its program and files, its CPU binding (task/affinity refuses a request outside the
# step's CPUs: a step launched inside a step, a partial-node allocation), its ids, its
# accounting frequency, its number of steps.
_JOB_REASONS = re.compile(r"No such file or directory|Permission denied|Exec format error|Not a directory|"
                          r"Invalid (?:user|group) id|Invalid job id|Unable to satisfy cpu bind request|"
                          r"CPU binding outside of job step allocation|"
                          r"Invalid accounting frequency|"
                          r"Too many job steps on node|Invalid user for job", re.IGNORECASE)
# Slurm could not lay the tasks out on the node's CPUs ("this should never happen" beside it): the job's
# distribution request or Slurm's own binding logic; the line does not say which, and it is not the node.
_LAYOUT_REASONS = re.compile(r"Unable to layout tasks on given cpus", re.IGNORECASE)
# The credential outlived its lifetime (slurm.conf AuthInfo cred_expire, 120 s by default) between the
# controller signing it and the node reading it: one clock or the other is off, a prolog ran longer than the
# lifetime, or a controller flooded with steps handed it out late. Slurm's, not this node's alone.
_EXPIRED_REASONS = re.compile(r"Job credential (?:expired|replayed)", re.IGNORECASE)
# The job was already over when its step launched (cancelled, timed out): a consequence, not a cause.
_ENDED_REASONS = re.compile(r"Job credential revoked|Job step not running|Job step already exists|"
                            r"Job/step already completing|Kill job already complete", re.IGNORECASE)


@decoder("slurm_launch_reason")
def decode_launch_reason(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A launch that failed for the job's own program or request is an application error on that node;
    one refused because the job had already ended explains nothing; an expired credential is Slurm's,
    without a culprit node."""
    reason = str(sym.fields.get("reason", ""))
    if _JOB_REASONS.search(reason):
        sym.category, sym.responsible, sym.strength = "application", "workload", 55
    elif "host" not in sym.fields and not _ENDED_REASONS.search(reason):
        # srun's 'task N launch failed: <reason>' names no node: the site's launch stack (PMIx aborting in
        # slurmstepd, a SPANK or container plugin, the interconnect plugin) as a rule, sometimes the launch
        # line's options; srun prints it on the first node whatever node failed, so no node is blamed
        sym.category, sym.responsible, sym.strength = "node_failure", "unknown", 40
        sym.notes.append("srun names no node for a task launch failure: the site's launch stack (PMIx, SPANK or "
                         "container plugins, the interconnect) or the launch line's --mpi / container options")
    elif _LAYOUT_REASONS.search(reason):
        sym.category, sym.responsible, sym.strength = "unknown", "unknown", 40
    elif _ENDED_REASONS.search(reason):
        sym.role, sym.category, sym.responsible, sym.strength = "context", "unknown", "unknown", 0
    elif _EXPIRED_REASONS.search(reason):
        sym.responsible = "unknown"
        sym.notes.append("an expired credential: the controller's or this node's clock, a prolog longer than "
                         "the credential's lifetime, or a controller that launched the step late; not the node alone")
    return True


# Reasons the controller gives for a step it could not create that are its own, not the step's request
# (slurm_errno.c): its credential signing, an internal error, a standby backup, the interconnect plugin,
# and the RPC between srun and slurmctld failing or refused
_CONTROLLER_STEP_REASONS = re.compile(
    r"Error generating job credential|Slurm internal error|backup controller in standby mode|"
    r"Error configuring interconnect|Communication connection failure|Zero Bytes were transmitted or received|"
    r"Protocol authentication error|Incompatible versions of client and server code|Insane message length",
    re.IGNORECASE)


@decoder("slurm_step_create_reason")
def decode_step_create_reason(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A step the controller could not create for a reason of its own is Slurm's setup (node_failure, no
    node blamed); any other reason is the step's request, the job's."""
    if _CONTROLLER_STEP_REASONS.search(str(sym.fields.get("reason", ""))):
        sym.category, sym.responsible, sym.strength = "node_failure", "unknown", 50
        sym.actions = ("read slurmctld's log at the step's time (credential signing, the controller's health, "
                       "munge and Slurm versions between srun's host and the controller)",)
    return True


# A controller outage ends the job only if the job ended soon after its srun lost the controller
CONTROLLER_OUTAGE_ENDS_WITHIN = timedelta(minutes=30)


@decoder("slurm_controller_unreachable")
def decode_controller_unreachable(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A step that could not reach the controller more than CONTROLLER_OUTAGE_ENDS_WITHIN before the job's end did
    not end it: the script went on without it (a preflight srun, a retry), so the line is context."""
    latest, end = latest_time(sym), ctx.job.end
    # no stamp before it: the next stamped line's, of any rank (the srun, sbatch or salloc line names none)
    if latest is None and sym.time is None and end is not None:
        latest = next_time(line, None, time_context(ctx, sym.node))
    if latest is not None and end is not None and end - latest > CONTROLLER_OUTAGE_ENDS_WITHIN:
        sym.role, sym.strength = "context", 0
        sym.fields["meaning"] = (f"the job went on for {int((end - latest).total_seconds() // 60)} minutes after this "
                                 "command lost the controller: it did not end the job")
    return True


@rule("refine.slurm_launch_failed_everywhere")
def launch_failed_everywhere(ctx: EngineContext, rule_: Rule) -> int:
    """The same launch failure from two or more nodes of a step is the cluster's setup (credentials,
    clocks, munge, slurm.conf) or the job's request, not one node: no node is blamed (responsible
    unknown), the first stays the candidate and the others support it."""
    by_reason: dict[str, list[Symptom]] = {}
    for sym in ctx.active():
        if sym.kind == "step_launch_error" and sym.role == "candidate" and sym.responsible == "infrastructure":
            by_reason.setdefault(_reason_key(sym), []).append(sym)
    count = 0
    for found in by_reason.values():
        nodes = sorted({s.node for s in found if s.node})
        if len(nodes) < 2:
            continue
        first, *rest = sorted(found, key=Symptom.sort_key)
        first.responsible = "unknown"
        first.notes.append(f"the same launch failure on {len(nodes)} nodes ({', '.join(nodes[:8])}): the "
                           "cluster's setup or the job's request, not one node")
        for sym in rest:
            sym.role, sym.responsible, sym.supports = "cascade", "unknown", first.id
        count += len(found)
    return count


def _reason_key(sym: Symptom) -> str:
    """The launch failure's reason without the numbers and names that differ from node to node."""
    return re.sub(r"[\d.]+|0x[0-9a-f]+", "#", str(sym.fields.get("reason", "")).strip().lower())


_SPOOL_REASONS = ("No such file or directory", "Permission denied", "Input/output error", "Not a directory")


@decoder("slurm_execve")
def decode_execve(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """slurmd's own copy of the batch script that it cannot run from its spool (missing, not executable:
    a spool dir unset or mounted noexec, an unreadable disk) is the node's fault."""
    program = str(sym.fields.get("program", ""))
    if program.endswith("/slurm_script") and sym.fields.get("reason") in _SPOOL_REASONS:
        sym.category, sym.responsible, sym.strength = "node_failure", "infrastructure", 60
        sym.summary = (f"the node's slurmd cannot run the batch script from its spool "
                       f"({program}: {sym.fields['reason']})")
    return True


# pyxis/enroot failing on the job's own image: a name, registry or credentials the job gave; an image enroot's hooks
# cannot run ldconfig in (enroot's hooks.d: 'Failed to refresh the dynamic linker cache', a musl image such as
# Alpine's, or one built for the other architecture)
_IMAGE_ERRORS = re.compile(r"(?i)manifest unknown|unauthorized|authentication required|"
                           r"invalid image|no such image|pull access denied|image .{0,80} not found|"
                           r"requested access to the resource is denied|invalid reference format|"
                           r"enroot-switchroot: failed to execute|doesn't exist in container|"
                           r"Failed to refresh the dynamic linker cache")
# pyxis's generic word for any import failure (pyxis_slurmstepd.c), and a line of the enroot log it prints after
# 'printing enroot log file:', indented under its prefix
_IMPORT_FAILED = "failed to import docker image"
_ENROOT_LOG_LINE = re.compile(r"pyxis: {3,}\S")
# What enroot said went wrong on the node, in the log pyxis prints after its generic failure (pyxis_slurmstepd.c:
# 'failed to import docker image', then enroot_print_last_log()): a directory of the node's runtime path it may not
# create (GNU mkdir quotes it '...' in the C locale, in curved quotes in a UTF-8 one), a shell variable the node's
# environment lacks, a user namespace or a file it cannot have for lack of space
_ENROOT_HOST_ERRORS = re.compile(r"mkdir: cannot create directory ['\u2018][^'\u2019\n]{1,200}['\u2019]: "
                                 r"Permission denied|HOME: unbound variable|failed to create user namespace|"
                                 r"Write failed because No space left on device|"
                                 r"FATAL ERROR:\s?write_file: failed to create file")
_NO_SPACE = re.compile(r"No space left on device|write_file: failed to create file")
# enroot's mount hook failing on a mount the job asked for: 'enroot-mount: failed to mount: <src> at <dst>: <why>'
_ENROOT_MOUNT = re.compile(r"enroot-mount: failed to mount: \S{1,300} at \S{1,300}: "
                           r"(Permission denied|No such file or directory)")
# The job's own image or request, in a container runtime's words: a program the image lacks, a bind
# destination a --writable container does not have, an absolute path the bind needs
_JOB_CONTAINER = re.compile(r"(?i)enroot-switchroot: failed to execute|doesn't exist in container|"
                            r"destination must be an absolute path|no such image|manifest unknown")


@decoder("container_runtime")
def decode_container_runtime(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Whose a container runtime's failure is: the job's image or request when the words say so; both the
    node's driver and the job's image when the image asks for a newer CUDA than the driver has;
    otherwise the nodes' runtime setup (no node blamed). Apptainer's 'container creation failed' is read
    for what failed inside it; a bare one that names neither side says nothing."""
    text = extra["text"]
    if _JOB_CONTAINER.search(text):
        sym.category, sym.responsible, sym.strength = "application", "workload", 50
        sym.actions = ("fix the job's image or container options (the program or bind destination it names)",)
    elif sym.fields.get("stage") == "requirement" or "requirement error: unsatisfied condition" in text:
        sym.category, sym.strength = "unknown", 40
        sym.fields["readings"] = ["node_failure", "application"]
        sym.actions = ("update the nodes' driver to what the image needs, or run an image built for the "
                       "driver the nodes have",)
    elif sym.fields.get("creation") and "nvidia-container-cli" not in text and not _NODE_IMAGE_DRIVER.search(text):
        sym.role, sym.strength = "context", 0
    return True


# Apptainer's image drivers, FUSE mounts and loop devices failing on the node: its kernel, FUSE packages and
# singularity.conf, not the image (apptainer/apptainer #3348: fusermount3 on a RHEL 8 before 8.6; sylabs/singularity
# #1499: no loop device to attach the image to, pkg/util/loop's 'No loop devices available' behind 'failed to find
# loop device: could not attach image file to loop device'); a bad squashfs superblock may be either
_NODE_IMAGE_DRIVER = re.compile(r"image driver mount failure|(?:squashfuse(?:_ll)?|fuse2fs|fuse-overlayfs|gocryptfs) "
                                r"(?:instance )?exited|fusermount3?: |failed to exec fusermount|fuse: device not "
                                r"found|mount hook function failure|failed to find loop device|could not attach image "
                                r"file to loop device|[Nn]o (?:more )?(?:available )?loop devices")


# what srun and slurmstepd print right after a step's OOM report, naming the node it happened on
_OOM_SIBLING = re.compile(r"srun: error: ([\w.-]{1,128}): tasks? [\d,-]{1,40}: Out Of Memory|"
                          r"\*\*\* STEP \S{1,40} ON ([\w.-]{1,128}) CANCELLED")


@decoder("slurm_oom_node")
def decode_oom_node(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """slurmstepd's 'Detected N oom_kill event(s) in StepId=J.S' names no node; in a job's combined output
    the srun or STEP line just after it does (a job node only)."""
    if sym.node is None:
        for text in line.iter_following(8):
            sibling = _OOM_SIBLING.search(text)
            named = job_node(ctx, sibling.group(1) or sibling.group(2)) if sibling else None
            if named:
                sym.node = named
                break
    return True


_STOPPED_BY_USER = {"1", "SIGHUP", "2", "SIGINT"}  # a closed terminal, a Ctrl-C: the user's own stop


@decoder("death_signal")
def decode_death_signal(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """SIGHUP and SIGINT to the launcher are its user stopping it (cancelled, the workload's); any other
    signal is context for the job's state and Slurm's lines to explain."""
    signal = str(sym.fields.get("signal") or sym.fields.get("number") or "")
    if signal in _STOPPED_BY_USER:
        sym.role, sym.strength = "candidate", 45
        how = "SIGHUP: its terminal closed" if signal in ("1", "SIGHUP") else "SIGINT: interrupted"
        sym.summary = f"the job's launcher was stopped by its user ({how})"
    return True


# SPANK callbacks slurmstepd / slurmd call once the tasks are gone (spank.c's step_fn_t order)
_AFTER_TASKS_CALLBACKS = frozenset({"task_exit", "job_epilog", "exit", "slurmd_exit"})


@decoder("slurm_spank")
def decode_spank(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A SPANK failure is the node's container setup unless the plugin's lines just before it say the
    job's image could not be had; the plugin's own explanation is kept as the symptom's detail. A callback
    that runs once the tasks have ended (the job's epilog, the step's exit) failed after the job: context."""
    if str(sym.fields.get("callback", "")).removeprefix("slurm_spank_") in _AFTER_TASKS_CALLBACKS:
        sym.role, sym.strength = "context", 0
        sym.notes.append("this SPANK callback runs after the job's tasks ended: it may drain the node, it did not "
                         "end the job")
        return True
    enroot_logged = False
    for previous in line.preceding(30):
        mount = _ENROOT_MOUNT.search(previous)
        if mount is not None:
            # a path the job asked to mount (--container-mounts): one that is not there is the job's; one the
            # file system refuses (NFS root squash, an ACL) is the storage's, no node blamed
            missing = mount.group(1) == "No such file or directory"
            sym.category, sym.responsible = ("application", "workload") if missing else ("storage", "unknown")
            sym.strength = 50
            sym.fields["plugin_said"] = previous.strip()[:200]
            return True
        if _ENROOT_HOST_ERRORS.search(previous):
            # the enroot log pyxis dumps after its generic 'failed to import docker image': the node's own setup
            # (a runtime directory it may not create, a user namespace it cannot have) or its disk, not the image
            sym.category = "storage" if _NO_SPACE.search(previous) else "node_failure"
            sym.responsible, sym.strength = "unknown", 50
            sym.fields["plugin_said"] = previous.strip()[:200]
            return True
        if _IMAGE_ERRORS.search(previous) or (_IMPORT_FAILED in previous and enroot_logged):
            # the image the job named could not be had; pyxis's generic import failure counts only when enroot's log,
            # dumped after it, shows the import under way (an empty log says nothing of whose the failure is)
            sym.category, sym.responsible, sym.strength = "application", "workload", 50
            sym.fields["plugin_said"] = previous.strip()[:200]
            return True
        enroot_logged = enroot_logged or _ENROOT_LOG_LINE.search(previous) is not None
        if "pyxis:" in previous or "enroot" in previous or "nvidia-container-cli" in previous:
            sym.fields.setdefault("plugin_said", previous.strip()[:200])
    return True


@decoder("stale_allocation")
def decode_stale_allocation(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """srun pointed at an allocation that is gone: another job's (an inherited SLURM_JOB_ID, an expired salloc shell)
    is the job's own launch; this very job's is its own end, which its state and Slurm's lines say: context."""
    named = str(sym.fields.get("job", ""))
    if named and named == ctx.job.job_id.split("+", 1)[0]:  # a heterogeneous job's component '101+0' is job 101
        sym.role, sym.strength = "context", 0
        sym.notes.append("the allocation srun named is this job's own: it had ended (its state says why)")
    return True


@decoder("slurm_this_jobs_row")
def decode_this_jobs_row(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A squeue row (its JOBID first) counts only for this job or its array: another job's row is not this
    job's state."""
    named = str(sym.fields.get("job", ""))
    return not named or named in (ctx.job.job_id.split("_")[0], ctx.job.array_job_id)


@rule("scheduler.job_state")
def job_state(ctx: EngineContext, rule_: Rule) -> int:
    """The job's final state and exit codes from job.yaml / sacct, as a symptom with its evidence."""
    job = ctx.job
    if not job.state and job.job_id == "unknown":
        return 0
    line = _job_yaml_line(ctx, "state")
    raw = f"state: {job.state} exit_code: {job.exit_code} derived_exit_code: {job.derived_exit_code}"
    evidence = EvidenceRef(source="scheduler", node=None, file="job.yaml", line=line, offset=0,
                           time=job.end, raw=raw)
    ctx.symptoms.append(Symptom(kind="job_state", rule_id=rule_.id, node=None, time=job.end, evidence=[evidence],
                                fields={"state": job.state, "exit_code": job.exit_code,
                                        "derived_exit_code": job.derived_exit_code},
                                role="context", summary=f"slurm job state {job.state or '?'} "
                                f"exit {job.exit_code} derived {job.derived_exit_code}"))
    return 1


def _job_yaml_line(ctx: EngineContext, key: str) -> int:
    try:
        with open_evidence(ctx.bundle.root / "job.yaml") as handle:
            for number, raw in enumerate(handle.read(1 << 20).splitlines(), start=1):
                if raw.lstrip().startswith(key.encode() + b":"):
                    return number
    except OSError:
        pass
    return 0


@rule("scheduler.sacct_steps")
def sacct_steps(ctx: EngineContext, rule_: Rule) -> int:
    """Failed steps from ``sacct --parsable2`` output in the bundle (``sacct/*.txt``, header line
    first), each with its file and line as evidence."""
    count = 0
    for bf in ctx.bundle.files:
        if bf.source != "scheduler" or not bf.rel.endswith(".txt"):
            continue
        cov = ctx.coverage_for("sacct")
        cov.files += 1
        try:
            with open_evidence(bf.path) as handle:
                lines = handle.read(4 << 20).decode("utf-8", errors="replace").splitlines()
        except EVIDENCE_READ_ERRORS as exc:
            cov.notes.append(f"{bf.rel}: cannot read: {getattr(exc, 'strerror', None) or exc}")
            continue
        cov.lines += len(lines)
        found = _sacct_records(ctx, rule_, bf.rel, lines)
        cov.symptoms += found
        count += found
    return count


def _sacct_records(ctx: EngineContext, rule_: Rule, rel: str, lines: list[str]) -> int:
    found = 0
    for parsed in parsable_rows(lines):
        row = parsed.cells
        step, state = row.get("jobid", ""), normalise(row.get("state", ""))
        if "." not in step or state not in FAILED_STATES:
            continue
        evidence = EvidenceRef(source="scheduler", node=None, file=rel, line=parsed.number, offset=0, time=None,
                               raw=parsed.line[:RAW_LINE_CAP])
        fields = {"step": step, "state": state, "exit_code": row.get("exitcode", ""),
                  "nodelist": row.get("nodelist", "")}
        ctx.symptoms.append(Symptom(kind="step_state", rule_id=rule_.id, node=None, time=None, evidence=[evidence],
                                    fields=fields, role="context",
                                    summary=f"step {step} {state.lower()} exit {fields['exit_code']}"))
        found += 1
    return found


@decoder("pals_rpc")
def decode_pals_rpc(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """PALS's word that a node stopped answering names that node; a timeout seen from the head alone or a
    launch it could not forward is weaker."""
    if ctx.job.steps:
        # sacct lists the job's steps (its batch step, srun's numbered ones): a Slurm job, which PALS (PBS's launcher
        # on HPE Cray EX) never launches; its words in the output are the program's own print (a log of another run,
        # a test) and name no node
        sym.role, sym.strength = "context", 0
        sym.notes.append("the job is Slurm's (sacct lists its steps): PALS did not launch it")
        return True
    if sym.fields.get("rpc") == "launch" or ("seconds" in sym.fields and "reporter" not in sym.fields):
        sym.strength = 45
    return True



# the plugin loader's words for a plugin that is there but did not load (src/common/plugin.c plugin_strerror),
# and PMIx's own
_PLUGIN_LOAD_FAILED = re.compile(r"Couldn't load specified plugin name for|can not load PMIx library|"
                                 r"Plugin init\(\) callback failed|Dlopen of plugin file failed|"
                                 r"Incompatible plugin version|Plugin name/type/version symbol missing")


@decoder("slurm_plugin_load")
def decode_plugin_load(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A plugin the site's Slurm has but could not load (its library gone, a build against another PMIx) is
    the installation's, not the job's request: node_failure without a culprit."""
    if sym.fields.get("loaded") or any(_PLUGIN_LOAD_FAILED.search(text) for text in line.preceding(6)):
        sym.kind, sym.category, sym.responsible, sym.strength = "plugin_load_error", "node_failure", "unknown", 50
        sym.actions = ("the site's Slurm installation: rebuild or reinstall the plugin's library (for mpi/pmix, "
                       "the PMIx it was built against), then check 'srun --mpi=list'",)
    return True


@decoder("slurm_prolog")
def decode_prolog(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """'Prolog failure on node X' names the node whose Prolog failed; the controller's own prolog
    (PrologSlurmctld, src/slurmctld/prep_slurmctld.c) runs on no job node, so its failure blames none: not the
    node whose output printed it, nor a one-node job's only node."""
    if not sym.fields.get("host"):
        sym.node = None
        sym.summary = f"{sym.fields.get('what') or 'PrologSlurmctld'} failed on the controller; the job was killed"
    return True


@decoder("cloud_node_launch")
def decode_cloud_node_launch(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A node that never came up names no machine to blame: the symptom has no node (its evidence still says
    which file the line was read from)."""
    sym.node = None
    return True
