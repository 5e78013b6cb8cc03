"""The corpus's job output and kernel logs as they reach us through other hands: with Windows line ends,
trailing blanks, `cat -n`'s numbers, a log viewer's line-number gutter, or HTML-escaped (copied from a web page's
source). None of these changes what the job or the kernel said, so none may change a verdict. Every case with
application logs is re-rendered each way (its kernel logs too) and diagnosed again (about 40 s for the whole
corpus); the verdict (status, category, culprit nodes) must be the original's. Found so far: a trailing blank
after 'Name:' made an exception line, one after 'initialization error:' a container runtime error, and one after
'nfs: server X OK' hid the recovery."""

from __future__ import annotations

import html
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from slurm_attrib.engine import Engine
from slurm_attrib.evaluate import load_cases
from slurm_attrib.ruleset import load_ruleset

CORPUS = Path(__file__).resolve().parents[1] / "corpus"

Render = Callable[[list[str]], list[str]]
RENDERINGS: dict[str, Render] = {
    "crlf": lambda lines: [line + "\r" for line in lines],
    "trailing_blanks": lambda lines: [line + "  " if line else line for line in lines],
    "cat_n": lambda lines: [f"{number:>6}\t{line}" for number, line in enumerate(lines, start=1)],
    "viewer_gutter": lambda lines: [f"{number:>5} | {line}" for number, line in enumerate(lines, start=1)],
    "html_escaped": lambda lines: [html.escape(line, quote=True) for line in lines],
}

ENGINE = Engine(load_ruleset(include_site=False))
CASES = [case for case in load_cases(CORPUS) if (case.path / "applog").is_dir()]


def _verdict(path: Path) -> tuple[str, str, tuple[str, ...]]:
    diagnosis = ENGINE.diagnose(path)
    category = diagnosis.category if diagnosis.status != "unattributed" else ""
    return diagnosis.status, category, tuple(sorted(diagnosis.culprit_nodes))


def _rerendered(case_dir: Path, into: Path, render: Render) -> bool:
    """A copy of the case with each application and kernel log's lines rendered so; False when none could be
    (binary)."""
    shutil.copytree(case_dir, into)
    touched = False
    for log in sorted([*(into / "applog").rglob("*"), *(into / "syslog").rglob("*")]):
        if not log.is_file():
            continue
        try:
            text = log.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            continue  # bytes that are not text: no presentation of them to vary
        ends = text.endswith("\n")
        lines = text[:-1].split("\n") if ends else text.split("\n")
        log.write_text("\n".join(render(lines)) + ("\n" if ends else ""), encoding="utf-8", newline="")
        touched = True
    return touched


def test_most_cases_have_application_logs_to_vary() -> None:
    assert len(CASES) >= 1000


@pytest.mark.parametrize("name", sorted(RENDERINGS))
def test_presentation_never_changes_a_verdict(name: str, tmp_path: Path) -> None:
    changed = []
    for case in CASES:
        copy = tmp_path / case.id
        if not _rerendered(case.path, copy, RENDERINGS[name]):
            continue
        before, after = _verdict(case.path), _verdict(copy)
        if before != after:
            changed.append(f"{case.id}: {before} -> {after}")
    assert changed == []
