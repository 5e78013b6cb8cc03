"""Bad input gets a diagnosis with a coverage note, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.errors import BundleError

JOB = "job_id: '77'\nnodes: [node-01]\nstate: FAILED\nexit_code: '1:0'\nstart: 2026-11-20T10:00:00Z\n" \
      "end: 2026-11-20T11:00:00Z\n"
XID = b"Nov 20 10:30:10 node-01 kernel: NVRM: Xid (PCI:0000:02:00): 79, pid='<unknown>', name=<unknown>, " \
      b"GPU has fallen off the bus.\n"


def _bundle(root: Path, job: str = JOB) -> Path:
    (root / "syslog").mkdir(parents=True)
    (root / "applog").mkdir()
    (root / "job.yaml").write_text(job)
    return root


def _notes(diag: object) -> str:
    return " ".join(n for c in diag.coverage for n in c.notes)  # type: ignore[attr-defined]


def test_binary_garbage_nul_and_invalid_utf8(engine: Engine, tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    (root / "syslog" / "node-01.log").write_bytes(os.urandom(300_000) + b"\n\x00\x00\xff\xfe\n" + XID)
    diag = engine.diagnose(root)
    assert diag.category == "gpu_hardware" and "NUL byte" in _notes(diag)


def test_a_50_mb_line_is_cut_not_loaded(engine: Engine, tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    with open(root / "syslog" / "node-01.log", "wb") as handle:
        handle.write(b"junk " * (10 << 20))
        handle.write(b"\n" + XID)
    diag = engine.diagnose(root)
    assert diag.category == "gpu_hardware"
    assert "longer than 1 MiB cut" in _notes(diag)


def test_truncated_file_without_newline(engine: Engine, tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    (root / "syslog" / "node-01.log").write_bytes(XID + XID[:40])
    assert engine.diagnose(root).category == "gpu_hardware"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_coverage_error(engine: Engine, tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    path = root / "syslog" / "node-01.log"
    path.write_bytes(XID)
    path.chmod(0)
    diag = engine.diagnose(root)
    assert "cannot read" in _notes(diag)


def test_planted_symlink_is_not_followed(engine: Engine, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(XID)
    root = _bundle(tmp_path / "b")
    (root / "syslog" / "node-01.log").symlink_to(secret)
    diag = engine.diagnose(root)
    assert diag.status == "unattributed"
    assert "symbolic link; not followed" in _notes(diag)
    assert "NVRM" not in str(diag.to_dict())


def test_missing_and_broken_job_yaml(engine: Engine, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    diag = engine.diagnose(empty)
    assert diag.status == "unattributed"
    assert any(c.connector == "job_facts" and c.state == "error" for c in diag.coverage)
    broken = _bundle(tmp_path / "broken", job="job_id: [unclosed\n")
    diag = engine.diagnose(broken)
    assert "invalid YAML" in _notes(diag)


def test_not_a_directory_is_a_clear_error(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="not a bundle directory"):
        engine.diagnose(tmp_path / "nope")


def test_fifo_in_the_bundle_never_blocks(engine: Engine, tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    os.mkfifo(root / "syslog" / "node-01.log")
    diag = engine.diagnose(root)
    assert "not a regular file; skipped" in _notes(diag)


@pytest.mark.parametrize("where", [20, 400])
def test_a_gzip_corrupt_inside_is_a_note_not_a_crash(engine: Engine, tmp_path: Path, where: int) -> None:
    """Bytes changed inside a compressed log (a CRLF conversion, a bad disk): zlib's error, raised at the first
    block (the byte-order-mark peek) or further in, ends that file's read with a note; the other files are read."""
    import gzip

    root = _bundle(tmp_path)
    data = bytearray(gzip.compress(XID * 2 + os.urandom(4_000)))
    for i in range(where, min(where + 40, len(data) - 8)):
        data[i] ^= 0x5A
    (root / "syslog" / "node-01.log.1.gz").write_bytes(bytes(data))
    (root / "syslog" / "node-01.log").write_bytes(XID)
    diag = engine.diagnose(root)
    assert diag.category == "gpu_hardware"
    assert "node-01.log.1.gz" in _notes(diag)


def test_read_error_mid_file_keeps_what_was_read(engine: Engine, tmp_path: Path) -> None:
    import gzip

    root = _bundle(tmp_path)
    data = gzip.compress(XID + os.urandom(200_000))
    (root / "syslog" / "node-01.log.gz").write_bytes(data[: len(data) // 2])
    diag = engine.diagnose(root)
    assert diag.category == "gpu_hardware"
    assert "read stopped" in _notes(diag)


def test_a_number_too_long_for_int_loses_a_line_not_the_bundle(engine: Engine, tmp_path: Path) -> None:
    """A 5,000-digit 'srun label', '[rankN]' or process-group rank (Python's int() refuses 4,300 digits) is no rank
    prefix: the bundle gets the verdict it gets with short numbers that name no rank of the job, not a traceback."""
    lines = ("{n}: RuntimeError: CUDA error: an illegal memory access was encountered\n"
             "[rank{n}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
             "[PG 0 Rank {n}] Watchdog caught collective operation timeout\n")
    verdicts = []
    for digits in ("9" * 5000, "9" * 10):
        root = _bundle(tmp_path / digits[:12])
        (root / "syslog" / "node-01.log").write_bytes(XID)
        (root / "applog" / "job.log").write_text(lines.format(n=digits))
        diag = engine.diagnose(root)
        verdicts.append((diag.status, diag.category, diag.culprit_nodes,
                         sorted(s.kind for s in [*diag.candidates, *diag.supporting])))
    assert verdicts[0] == verdicts[1] and "xid" in verdicts[0][3]


def test_a_line_a_conversion_refuses_is_a_note(engine: Engine, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever else a line's text makes a conversion refuse (a ValueError while it is judged) loses that line,
    with a coverage note that names it, and the rest of the bundle is judged as before."""
    from slurm_attrib.engine import timeinfer

    real = timeinfer.split_rank

    def refusing(text: str) -> object:
        if "poison" in text:
            raise ValueError("refused on purpose")
        if "varied" in text:
            raise ValueError(text)  # a message the line shapes: a file's notes still name eight at most
        return real(text)

    monkeypatch.setattr(timeinfer, "split_rank", refusing)
    root = _bundle(tmp_path)
    (root / "syslog" / "node-01.log").write_bytes(XID)
    illegal = "CUDA error: an illegal memory access was encountered"
    (root / "applog" / "job.log").write_text(f"poison RuntimeError: {illegal}\npoison RuntimeError: {illegal}\n"
                                             + "".join(f"varied {n} {illegal}\n" for n in range(30)))
    diag = engine.diagnose(root)
    assert diag.category == "gpu_hardware" and diag.culprit_nodes == ["node-01"]
    notes = [note for cov in diag.coverage for note in cov.notes if "not judged" in note]
    assert "applog/job.log: 2 line(s) not judged, ValueError: refused on purpose (first: line 1)" in notes
    assert "applog/job.log: 23 line(s) not judged, other errors (first: line 10)" in notes and len(notes) == 9
