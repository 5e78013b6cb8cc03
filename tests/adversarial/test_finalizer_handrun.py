"""A hand-run ``diagnose --store X`` never writes into the production spool unless told to (issue 11):
when X cannot be used, the verdict fell back to the configured spool, and the running finalizer then
imported it into the production store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from slurm_attrib.data import demo_bundle

from .finalizer_harness import Site


def _diagnose(site: Site, store: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "slurm_attrib.cli", "diagnose", "--no-site-rules",
                           "--bundle", str(demo_bundle()), "--store", str(store), "--format", "json", *extra],
                          env=site.env, capture_output=True, text=True, timeout=120)


def test_an_unusable_store_does_not_send_the_verdict_to_the_production_spool(tmp_path: Path) -> None:
    site = Site(tmp_path)  # its configuration names the production spool
    mine = tmp_path / "not-a-store"
    mine.write_bytes(b"garbage" * 100)
    result = _diagnose(site, mine)
    assert result.returncode == 4, result.stderr
    assert '"status"' in result.stdout  # the diagnosis is still printed
    assert "verdict not recorded" in result.stderr
    assert not (site.spool / "verdicts").exists() or not list((site.spool / "verdicts").iterdir())
    finalizer = site.finalize()  # nothing for the production finalizer to import
    assert finalizer.returncode == 0 and not site.store.exists()


def test_with_spool_dir_the_verdict_goes_where_it_was_told(tmp_path: Path) -> None:
    site = Site(tmp_path)
    mine = tmp_path / "not-a-store"
    mine.write_bytes(b"garbage" * 100)
    result = _diagnose(site, mine, "--spool-dir", str(tmp_path / "my-spool"))
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "my-spool").glob("verdict-*.json"))) == 1
    assert not (site.spool / "verdicts").exists()
