"""The CLI: every command has help text and is documented in the README; errors are one line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from slurm_attrib import cli
from slurm_attrib.cli import build_parser, main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{prefix}{name}", sub))
                out.extend(_commands(sub, f"{prefix}{name} "))
    return out


def test_every_command_has_help_and_is_in_the_readme() -> None:
    commands = _commands(build_parser())
    assert {"diagnose", "demo", "rules list", "rules lint", "rules test"} <= {c for c, _ in commands}
    for name, sub in commands:
        assert sub.description, f"{name} has no help text"
        assert f"slurm-attrib {name}" in README, f"{name} is not documented in README.md"


def test_each_command_is_registered_by_the_module_the_table_names() -> None:
    """A run imports only its command's module (cli.COMMANDS): the table must say who registers what."""
    every = {name for name, _ in _commands(build_parser()) if " " not in name}
    assert every == set(cli.COMMANDS)
    for group in cli.GROUPS:
        mine = {name for name, module in cli.COMMANDS.items() if module == group}
        for name in mine:
            alone = {c for c, _ in _commands(build_parser([name, "--help"])) if " " not in c}
            assert alone == mine, name


def test_a_run_imports_only_its_commands_module() -> None:
    """`diagnose` does not pay for the store, the service or the connectors at every start."""
    import subprocess
    import sys

    code = ("import sys; from slurm_attrib.cli import build_parser; build_parser(['diagnose', '--bundle', 'x']); "
            "print(sorted(m for m in sys.modules if m.startswith('slurm_attrib.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "slurm_attrib.cli.diagnose" in loaded
    for other in ("slurm_attrib.cli.store", "slurm_attrib.cli.serve", "slurm_attrib.cli.watch", "slurm_attrib.store"):
        assert f"'{other}'" not in loaded, other


def test_a_name_that_is_no_command_lists_them_all(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["diagnos"])
    err = capsys.readouterr().err
    assert "invalid choice: 'diagnos'" in err and "'import-spool'" in err


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-site-rules", "--format", "json"]) == 0
    diag = json.loads(capsys.readouterr().out)
    assert diag["status"] == "attributed" and diag["category"] == "nvlink"
    assert diag["culprit_nodes"] == ["node-02"] and diag["root_cause"]["gpu"] == "0000:3b:00"


def test_missing_bundle_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["diagnose", "--no-site-rules", "--bundle", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a bundle directory" in err


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`slurm-attrib rules list --format json | head -c1`: no "Broken pipe" message, exit 0. The reader
    closes before the command writes, so every write meets a closed pipe (no race with the pipe buffer)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "slurm_attrib.cli", "rules", "list", "--no-site-rules",
                             "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    assert err == b""


@pytest.mark.parametrize(("forced", "expected"), [(None, None), ("re", "re")])
def test_version_names_the_prefilter(forced: str | None, expected: str | None, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    if forced is None:
        monkeypatch.delenv("SLURM_ATTRIB_PREFILTER", raising=False)
    else:
        monkeypatch.setenv("SLURM_ATTRIB_PREFILTER", forced)
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    release, used = capsys.readouterr().out.splitlines()
    assert release.startswith("slurm-attrib ")
    assert used in ("prefilter: hyperscan", "prefilter: re")
    if expected is not None:
        assert used == f"prefilter: {expected}"
