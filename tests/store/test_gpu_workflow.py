"""NVIDIA's Xid 13/31/43 workflow with the store's history: the same GPU faulting across jobs is a
hardware suspect, a solo event is the application's."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from slurm_attrib.engine import Engine
from slurm_attrib.ruleset import load_ruleset
from slurm_attrib.store import Store, settings_with_history
from slurm_attrib.store.rows import JobKey

XID13 = "Nov 20 {t} node-01 kernel: NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception: ESR 0x404000=0x80000002\n"


def job(tmp_path: Path, job_id: str, day: int) -> Path:
    folder = tmp_path / job_id
    (folder / "syslog").mkdir(parents=True)
    (folder / "job.yaml").write_text(f"job_id: '{job_id}'\ncluster: c\nnodes: [node-01]\nstate: FAILED\n"
                                     f"start: '2026-11-{day:02d}T10:00:00Z'\nend: '2026-11-{day:02d}T10:40:00Z'\n"
                                     "exit_code: '1:0'\n")
    (folder / "syslog" / "node-01.log").write_text(XID13.replace("Nov 20", f"Nov {day:2d}").format(t="10:30:10"))
    return folder


def diagnose(engine: Engine, store: Store, bundle: Path, day: int) -> list[str]:
    end = datetime(2026, 11, day, 10, 40, tzinfo=timezone.utc)
    settings = settings_with_history(engine.settings, store, ["node-01"], end, 30, JobKey("c", bundle.name, "", 0))
    diag = engine.diagnose(bundle, settings)
    store.record(diag, end)
    return diag.annotations


def test_same_gpu_across_jobs_becomes_a_hardware_suspect(tmp_path: Path) -> None:
    engine = Engine(load_ruleset(include_site=False))
    with Store.open(tmp_path / "s.sqlite") as store:
        first = diagnose(engine, store, job(tmp_path, "501", 18), 18)
        assert any("solo event" in a for a in first)
        second = diagnose(engine, store, job(tmp_path, "502", 20), 20)
        assert any("faulted in 1 earlier job(s) (501)" in a and "hardware suspect" in a for a in second), second
