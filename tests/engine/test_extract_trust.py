"""KernelLines' reading of kernel text a process chose: a rule's words inside a quoted string of the kernel's
message are the copied name or value, whatever message quotes them."""

from __future__ import annotations

import pytest

from slurm_attrib.engine.extract import _after_copied_text, _inside_quotes
from slurm_attrib.timestamps import TimeContext, parse_line_time


@pytest.mark.parametrize(("line", "words", "inside"), [
    # quoted by the kernel: a mount option, a path (any message of that shape, not only the known heads)
    ("[  812.552100] tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus.'",
     "NVRM: Xid", True),
    ("[  812.552100] squashfs: bad option 'x', then 'NVRM: Xid (PCI:0000:01:00): 79'", "NVRM: Xid", True),
    # the kernel's own report, its quoted pid and name closed before the words
    ("[  812.552100] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "GPU has fallen off", False),
    ("[  812.552100] NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
     "NVRM: Xid", False),
    # a quote in the stamp's part of the line (an export's wrapper) is not the message's
    ("Mar 21 20:18:56 gpu-01 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.", "NVRM", False),
])
def test_words_inside_a_kernel_quote(line: str, words: str, inside: bool) -> None:
    stamp = parse_line_time(line, TimeContext())
    assert _inside_quotes(line, stamp, line.index(words)) is inside


@pytest.mark.parametrize(("line", "words"), [
    # print_vma_addr's ' in <file>[start+size]' after a user-space crash report: the file's name is the process's
    ("Jun 11 09:40:12 gpu-w02 kernel: python[48211]: segfault (11) at 7fff8a1c0000 nip 7fff8a1c0010 lr 7fff8a1b0f24 "
     "code 1 in NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
     "[7fff8a1c0000+10000]", "NVRM: Xid"),
    ("2024-06-11T09:40:12+0000 gpu-w02 kernel: python[48211] bad frame in rt_sigreturn frame:00007ffd4a3c1e80 "
     "ip:7f3a2c1d4000 sp:7ffd4a3c2388 orax:ffffffffffffffff in NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off "
     "the bus.[7f3a2c1d4000+1000]", "NVRM: Xid"),
    # a path: direct I/O's 'File: <path> PID:', overlayfs' 'invalid origin (<dir>/<name>, ...)'
    ("[Tue Jun 11 09:40:12 2024] File: /scratch/mallory/NVRM: GPU 0000:01:00.0: GPU has fallen off the bus. "
     "PID: 48211 Comm: python", "NVRM: GPU"),
    ("2024-06-11T09:40:12+0000 gpu-w02 kernel: overlayfs: invalid origin (upper/NVRM: Xid (PCI:0000:07:00): 48, "
     "ftype=8000, origin ftype=4000).", "NVRM: Xid"),
    # a double-quoted option, and a path in single quotes whose own quote evens the count
    ('Jun 11 09:40:12.315783 gpu-w02 kernel: cgroup: cgroup2: unknown option "NVRM: GPU 0000:01:00.0: GPU has '
     'fallen off the bus."', "NVRM: GPU"),
    ('Jun 11 09:40:12 gpu-w02 kernel: proc: unrecognized mount option " mlx5_core 0000:5e:00.0: device\'s health '
     'compromised - reached miss count" or missing value', "mlx5_core"),
    ("2024-06-11T09:40:12.315775+00:00 gpu-w02 kernel: process 'home/mallory/bin/x'NVRM: Xid (PCI:0000:01:00): 79, "
     "GPU has fallen off the bus.' started with executable stack", "NVRM: Xid"),
    ("2024-06-11T09:40:12.315775+00:00 gpu-w02 kernel: process 'x' NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen "
     "off the bus.' started with executable stack", "NVRM: Xid"),
])
def test_words_after_text_the_kernel_copied(line: str, words: str) -> None:
    """Messages whose heads no list names (W151's hostile round): the match is refused by what precedes it."""
    stamp = parse_line_time(line, TimeContext())
    assert _after_copied_text(line, stamp, line.index(words)) is not None


@pytest.mark.parametrize(("line", "words"), [
    # the kernel's own words before a driver's report, and wrappers that quote the whole message
    ("[76914.214195] amdgpu 0000:dd:00.0: amdgpu: GPU reset begin!", "GPU reset"),
    ("[   77.508704] {1}[Hardware Error]: event severity: fatal", "[Hardware Error]"),
    ('         "msg": "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x22:0x56:762)"', "NVRM: GPU"),
    ('"Jun 23, 2025 @ 14:02:19.342","node-01","NVRM: GPU 0000:09:00.0: GPU has fallen off the bus."', "NVRM: GPU"),
    ('[0] kmsg.0: [1733139506, {"priority"=>3, "sequence"=>1907, "sec"=>199, "usec"=>234935, "msg"=>"NVRM: Xid '
     '(PCI:0000:07:00): 48, pid=1, DBE"}]', "NVRM: Xid"),
    ("kern  :crit  : [  +0.000003] [Tue Jan 13 04:33:10 2026] [T1130] EXT4-fs (sdb): Remounting filesystem "
     "read-only", "EXT4-fs (sdb): Remounting"),
    # a crash report's own words before its file: the match is the report, not the file
    ("Jun 11 09:40:12 gpu-w02 kernel: python[48211]: segfault at 0 ip 00007f3a2c1d4000 sp 00007ffd4a3c2388 error 4 "
     "in libcuda.so.1[7f3a2c000000+2000000]", "segfault at"),
])
def test_words_the_kernel_wrote(line: str, words: str) -> None:
    stamp = parse_line_time(line, TimeContext())
    assert _after_copied_text(line, stamp, line.index(words)) is None
