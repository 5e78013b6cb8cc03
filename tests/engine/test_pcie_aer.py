"""kernel.pcie_aer weighs a non-fatal error by what the kernel's recovery printed next, and only the kernel's own
line of the same host counts as that (a program's 'device recovery failed' in a mixed syslog file does not)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from slurm_attrib.engine import Engine

JOB = ('job_id: "1"\nnodes: [node-01]\nstart: "2025-01-26T00:30:00Z"\nend: "2025-01-26T01:18:30Z"\n'
       'state: FAILED\nexit_code: "1:0"\n')
# the error's report as open-gpu-kernel-modules #1229 shows it (its condensed Bus Error line), on a GPU's port
REPORT = ("Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: Uncorrectable (Non-Fatal) error received "
          "from 0000:63:00.0\n"
          "Jan 26 01:07:55 node-01 kernel: nvidia 0000:63:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
          "type=Transaction Layer, (Requester ID)\n")


def _aer(engine: Engine, tmp_path: Path, after: str) -> tuple[str, int]:
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "syslog" / "node-01.log").write_text(REPORT + after)
    ctx = engine.run(tmp_path)
    found = [s for s in ctx.symptoms if s.rule_id == "kernel.pcie_aer"]
    # the port's 'error received from' line, its detail following, is context; the detail line is the error
    assert [(s.role, s.strength) for s in found if "port" in s.fields] == [("context", 0)]
    found = [s for s in found if "port" not in s.fields]
    assert len(found) == 1
    return str(found[0].fields.get("recovery", "")), found[0].strength


@pytest.mark.parametrize(("after", "expected"), [
    ("Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: device recovery failed\n", ("failed", 70)),
    ("Jan 26 01:07:55 node-01 kernel: nvidia 0000:63:00.0: AER: can't recover (no error_detected callback)\n",
     ("failed", 70)),
    ("Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: device recovery successful\n", ("successful", 40)),
    ("", ("", 40)),
    # a user's logger line, and another host's kernel line in a central file: not this report's outcome
    ("Jan 26 01:07:55 node-01 alice[4242]: pcieport 0000:00:01.2: AER: device recovery failed\n"
     "Jan 26 01:07:56 node-01 kernel: pcieport 0000:00:01.2: AER: device recovery successful\n", ("successful", 40)),
    ("Jan 26 01:07:55 node-07 kernel: pcieport 0000:00:01.2: AER: device recovery failed\n", ("", 40)),
])
def test_the_kernels_recovery_outcome_weighs_a_non_fatal_error(engine: Engine, tmp_path: Path, after: str,
                                                                expected: tuple[str, int]) -> None:
    assert _aer(engine, tmp_path, after) == expected


def test_a_dmesg_capture_reads_the_recovery_outcome(engine: Engine, tmp_path: Path) -> None:
    """In dmesg's own format no line carries a host or tag: the outcome line after the report is the kernel's too."""
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(JOB.replace('start: "2025-01-26T00:30:00Z"\nend: "2025-01-26T01:18:30Z"\n', ""))
    (tmp_path / "syslog" / "node-01.log").write_text(
        "[ 3610.101022] nvidia 0000:63:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
        "type=Transaction Layer, (Requester ID)\n"
        "[ 3610.101984] pcieport 0000:00:01.2: AER: device recovery failed\n")
    found = [s for s in engine.run(tmp_path).symptoms if s.rule_id == "kernel.pcie_aer"]
    assert [(s.fields.get("recovery"), s.strength) for s in found] == [("failed", 70)]


def test_a_port_report_without_its_detail_is_the_error(engine: Engine, tmp_path: Path) -> None:
    """The port's line alone (the device could not be read) is the error, weighed by the recovery that follows."""
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "syslog" / "node-01.log").write_text(
        REPORT.splitlines(keepends=True)[0]
        + "Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: device recovery failed\n")
    found = [s for s in engine.run(tmp_path).symptoms if s.rule_id == "kernel.pcie_aer"]
    assert [(s.role, s.strength, s.fields.get("device"), s.fields.get("recovery")) for s in found] == [
        ("candidate", 70, "0000:63:00.0", "failed")]


PORT = "Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: Uncorrectable (Non-Fatal) error received from " \
       "0000:63:00.0\n"
FAILED = "Jan 26 01:07:55 node-01 kernel: pcieport 0000:00:01.2: AER: device recovery failed\n"


@pytest.mark.parametrize(("after", "expected"), [
    # the device's own driver says it is the GPU's, and that it cannot recover: the port's line is the error
    ("Jan 26 01:07:55 node-01 kernel: nvidia 0000:63:00.0: AER: can't recover (no error_detected callback)\n",
     [("candidate", 70, "nvidia")]),
    # a corrected error's detail under the same device is another error's, not this one's
    ("Jan 26 01:07:55 node-01 kernel: nvidia 0000:63:00.0: AER: PCIe Bus Error: severity=Correctable, "
     "type=Physical Layer, (Receiver ID)\n" + FAILED, [("candidate", 40, None)]),
    # a detail a program wrote (a logger line in the mixed syslog file) is not the kernel's
    ("Jan 26 01:07:55 node-01 alice[42]: nvidia 0000:63:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
     "type=Transaction Layer, (Requester ID)\n" + FAILED, [("candidate", 40, None)]),
    # the next error's report and its detail, of another device: this report's detail never came
    ("Jan 26 01:07:56 node-01 kernel: pcieport 0000:00:03.0: AER: Uncorrectable (Non-Fatal) error received from "
     "0000:65:00.0\nJan 26 01:07:56 node-01 kernel: nvidia 0000:65:00.0: PCIe Bus Error: severity=Uncorrectable "
     "(Non-Fatal), type=Transaction Layer, (Requester ID)\n", [("candidate", 40, None), ("context", 0, None)]),
    # another device's detail (a paste that lost that error's own report): not this report's
    ("Jan 26 01:07:55 node-01 kernel: nvidia 0000:65:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), "
     "type=Transaction Layer, (Requester ID)\n", [("candidate", 40, None)]),
    # the PCI core's line of a device with no driver bound, and the GPU driver's own 'NVRM: GPU <BDF>:', name none
    ("Jan 26 01:07:55 node-01 kernel: pci 0000:63:00.0: Removing from iommu group 12\n"
     "Jan 26 01:07:55 node-01 kernel: NVRM: GPU 0000:63:00.0: GPU has fallen off the bus.\n" + FAILED,
     [("candidate", 70, None)]),
    # a NIC's driver: the error is the network's, read as its detail line would be
    ("Jan 26 01:07:55 node-01 kernel: mlx5_core 0000:63:00.0: mlx5_pci_err_detected Device state = 1 pci_status: 0. "
     "Exit, result = 3, need reset\n" + FAILED, [("candidate", 70, "mlx5_core")]),
    # a disk controller's own lines speak for its device: the port's line is context
    ("Jan 26 01:07:55 node-01 kernel: nvme 0000:63:00.0: AER: can't recover (no error_detected callback)\n",
     [("context", 0, "nvme")]),
])
def test_what_follows_the_ports_report_decides_it(engine: Engine, tmp_path: Path, after: str,
                                                  expected: list[tuple[str, int, Optional[str]]]) -> None:
    """The port's 'error received from' line stands for the error unless the error's own detail follows (an
    uncorrected one, the kernel's, of the same device, before the next error's report); the device's driver,
    where a line of its own names it, says whose the device is."""
    (tmp_path / "syslog").mkdir()
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "syslog" / "node-01.log").write_text(PORT + after)
    found = [s for s in engine.run(tmp_path).symptoms if s.rule_id == "kernel.pcie_aer" and "port" in s.fields]
    assert [(s.role, s.strength, s.fields.get("driver")) for s in found] == expected
