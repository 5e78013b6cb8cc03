"""The Prometheus connector's findings (``metrics/NODE.promql.log``, connectors/prometheus.py).

Each line names its GPU by labels (``gpu=3 uuid=GPU-... pci=00000000:3B:00.0``); the decoders here turn
them into the symptom's GPU, weigh an Xid seen in ``DCGM_FI_DEV_XID_ERRORS`` by the same XID catalog as
a kernel Xid, and keep a hardware-slowed GPU (a straggler) from ever being a confident root cause alone.
"""

from __future__ import annotations

from typing import Any

from ...model import Symptom
from ...nvidia.assess import assess_xid
from ...nvidia.parse import XidEvent, normalise_pci
from ...scan import Line
from ...timestamps import format_utc, parse_iso
from ..context import EngineContext
from ..params import str_list
from ..registry import decoder

# A straggler fits a GPU slowed by heat or power, and a job that hung or waited on its own: alone it makes
# the verdict ambiguous with both (final.root_cause, as refine.gpu_indeterminate_cuda_error does).
STRAGGLER_READINGS = ("gpu_hardware", "application")


def _identify(sym: Symptom) -> None:
    """The GPU from the line's ``pci`` group, normalised as the kernel's Xid lines are. A label that is
    no PCI address leaves the GPU unnamed (the symptom stays, on its node)."""
    pci = sym.fields.get("pci")
    if isinstance(pci, str):
        try:
            sym.gpu = sym.fields["pci"] = normalise_pci(pci)
        except ValueError:
            sym.notes.append(f"pci label {pci[:40]!r} is not a PCI address")


def _between_samples(sym: Symptom) -> None:
    """A change first seen at one sample happened after the previous one: the symptom's time is that
    lower bound and ``time_upper`` the sample (the engine's convention for a line stamped only by its
    neighbours), so a CUDA error logged between the two samples can be explained by the fault."""
    since = sym.fields.pop("since", None)
    earliest = parse_iso(since) if isinstance(since, str) else None
    if earliest is None or sym.time is None or earliest >= sym.time:
        return
    sym.fields["time_inferred"] = "between two samples"
    sym.fields["time_upper"] = format_utc(sym.time)
    sym.time = earliest


@decoder("promql_gpu")
def decode_promql_gpu(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Name the GPU of a Prometheus finding; a change is placed between its two samples."""
    _between_samples(sym)
    _identify(sym)
    return True


@decoder("promql_xid")
def decode_promql_xid(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An Xid code from dcgm-exporter's gauge, assessed like a kernel Xid of that code. The gauge holds
    the code only, so payload decodes (Xid 74 registers, 144-150 IntrInfo) cannot run."""
    code = sym.fields.get("code")
    if not isinstance(code, int) or code <= 0:
        return False
    _identify(sym)
    _between_samples(sym)
    event = XidEvent(pci=sym.gpu or "", code=code, gpu_instance=None, compute_instance=None, pid=None,
                     process=None, message="")
    facts = ctx.bundle.facts_for(sym.node)
    assessment = assess_xid(event, facts.driver_version if facts else None)
    sym.role, sym.category, sym.responsible = assessment.role, assessment.category, assessment.responsible
    sym.strength, sym.actions = assessment.strength, assessment.actions
    sym.summary = f"prometheus: {assessment.summary} (DCGM_FI_DEV_XID_ERRORS; first seen at this sample)"
    sym.notes.append("from dcgm-exporter's last-Xid gauge: the code only, after the sample before the one showing it")
    return True


@decoder("promql_straggler")
def decode_promql_straggler(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A GPU slowed by hardware over a span: its time is that span, not one event (``time_upper`` is the
    last slowed sample, so a stronger fault inside the span leads), and alone it carries both readings."""
    _identify(sym)
    if _did_not_fail(ctx):
        sym.role, sym.strength = "context", 0
        sym.notes.append("the job did not fail: a slowdown it lived through explains nothing")
    until = sym.fields.pop("until", None)
    if isinstance(until, str):
        sym.fields["time_inferred"] = "a slowdown over a span of samples"
        sym.fields["time_upper"] = until
    sym.fields["readings"] = list(STRAGGLER_READINGS)
    return True


def _did_not_fail(ctx: EngineContext) -> bool:
    """The job ended in a success state with exit 0 (final.root_cause's ``params.success_states``)."""
    owner = ctx.ruleset.get("final.root_cause")
    states = str_list(owner, "success_states") if owner is not None else ("COMPLETED",)
    job = ctx.job
    return job.state in states and job.exit_code in ("0:0", "0") and job.derived_exit_code in ("0:0", "0")
