"""Issue 11 §3, bounded work per job: a job's output decides how many lines reach the rules, never how
many symptoms the engine holds. Before the caps, 4 MiB of `Bus error` lines took 154 s and 616 MB."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset

JOB = {"job_id": "77", "cluster": "c1", "nodes": ["node-01"], "start": "2026-11-20T10:00:00Z",
       "end": "2026-11-20T11:00:00Z", "state": "FAILED", "exit_code": "1:0"}


def _bundle(root: Path, text: str) -> Path:
    (root / "applog").mkdir(parents=True)
    (root / "job.yaml").write_text(yaml.safe_dump(JOB))
    (root / "applog" / "job.out").write_text(text)
    return root


def _bus_errors(ctx: object) -> list[object]:
    return [s for s in ctx.symptoms if s.kind == "bus_error"]  # type: ignore[attr-defined]


def _engine(**caps: int) -> Engine:
    engine = Engine(load_ruleset(include_site=False))
    engine.settings = dataclasses.replace(engine.settings, **caps)
    return engine


def test_one_line_repeated_a_hundred_thousand_times_makes_fifty_symptoms(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, "Bus error (core dumped)\n" * 100_000)
    ctx = _engine().run(bundle)
    assert len(_bus_errors(ctx)) == 50 and ctx.scan.hits == 100_000
    notes = ctx.coverage["app_log"].notes
    assert "applog/job.out: 99950 more line(s) of rule app.shm_exhausted past the caps (50 per rank, 10000 per " \
           "file: engine.max_symptoms_per_rank / _per_rule), counted, not kept" in notes
    assert ctx.outcome.category == "host_oom"


def test_a_new_rank_prefix_on_every_line_meets_the_per_file_cap(tmp_path: Path) -> None:
    """`print(f"{i}: Bus error")`: each line its own rank, so only the per-file cap bounds it."""
    bundle = _bundle(tmp_path, "".join(f"{i}: Bus error\n" for i in range(3000)))
    ctx = _engine(max_symptoms_per_rule=1000).run(bundle)
    assert len(_bus_errors(ctx)) == 1000
    assert any("2000 more line(s) of rule app.shm_exhausted" in n for n in ctx.coverage["app_log"].notes)


def test_the_kept_lines_are_the_first_ones(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, "".join(f"0: Bus error {i}\n1: Bus error {i}\n" for i in range(80)))
    ctx = _engine().run(bundle)
    lines = sorted(s.evidence[0].line for s in _bus_errors(ctx))  # type: ignore[attr-defined]
    assert len(lines) == 100 and lines == list(range(1, 101))


def test_xid_spam_on_one_gpu_does_not_crowd_out_another_gpus_fault(tmp_path: Path) -> None:
    """The kernel-side cap counts per GPU and Xid code, after the decoder read them."""
    spam = "".join(f"Nov 20 10:{10 + i // 60:02d}:{i % 60:02d} node-01 kernel: NVRM: Xid (PCI:0000:1b:00): 13, "
                   "pid=77, name=python, Graphics Exception: ESR 0x404600=0x80000001\n" for i in range(600))
    fault = ("Nov 20 10:30:00 node-01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, "
             "GPU has fallen off the bus.\n")
    bundle = _bundle(tmp_path, "0: RuntimeError: CUDA error: unknown error\n")
    (bundle / "syslog").mkdir()
    (bundle / "syslog" / "node-01.log").write_text(spam + fault)
    ctx = _engine().run(bundle)
    xids = [s for s in ctx.symptoms if s.kind == "xid"]
    assert sum(s.fields.get("code") == 13 for s in xids) == 50
    assert [s.fields.get("code") for s in xids if s.gpu == "0000:3b:00"] == [79]
    assert any("550 more line(s) of rule kernel.nvidia_xid" in n for n in ctx.coverage["kernel_log"].notes)
