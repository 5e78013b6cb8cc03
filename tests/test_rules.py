"""Rules as data: every rule lints clean, has positive and negative fixtures, and passes them;
the loader rejects duplicate ids with both places named; no rule turns a clean baseline into a
verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slurm_attrib.baseline import BaselineLog, baseline_logs, baseline_matches, write_bundle
from slurm_attrib.engine import Engine
from slurm_attrib.rulelint import lint
from slurm_attrib.ruleset import leading_flags, load_ruleset
from slurm_attrib.ruletest import fixture_paths, run_fixture

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "rules"
RULE_IDS = [r.id for r in load_ruleset(include_site=False).rules]


def test_lint_clean_including_fixture_presence(engine: Engine) -> None:
    errors = [str(i) for i in lint(engine.ruleset, FIXTURES) if i.severity == "error"]
    assert errors == []


@pytest.mark.parametrize("rule_id", RULE_IDS)
@pytest.mark.parametrize("kind", ["positive", "negative"])
def test_rule_fixtures(engine: Engine, rule_id: str, kind: str) -> None:
    paths = fixture_paths(FIXTURES, rule_id, kind)
    assert paths, f"rule {rule_id} has no {kind} fixture under {FIXTURES / rule_id / kind}"
    rule = engine.ruleset.get(rule_id)
    assert rule is not None
    failures = [f"{r.path}: {r.detail}" for r in (run_fixture(engine, rule, p, kind) for p in paths) if not r.passed]
    assert failures == []


def test_a_negative_fixtures_outcome_is_checked(engine: Engine, tmp_path: Path) -> None:
    """A negative fixture that says what the diagnosis is must fail when the diagnosis differs, not pass because
    the rule did not fire."""
    rule = engine.ruleset.get("refine.causal_model")
    assert rule is not None
    fixture = tmp_path / "no_fault.yaml"
    fixture.write_text(
        'job: {job_id: "1", cluster: demo, user: u, partition: p, nodes: [node-01], state: FAILED, exit_code: "1:0",'
        ' derived_exit_code: "0:0"}\n'
        "files:\n  applog/node-01.log: |\n    KeyError: 'x'\n"
        "expect:\n  outcome: {status: attributed, culprit_nodes: [node-01]}\n")
    result = run_fixture(engine, rule, fixture, "negative")
    assert not result.passed and result.detail == "outcome.culprit_nodes: expected ['node-01'], got []"


def test_duplicate_site_rule_id_names_both_places() -> None:
    rule = b"id: site.dup\nversion: 1\nphase: extract\ntitle: t\ndescription: a duplicate id\n" \
           b"match: {source: kernel, anchors: [NVRM], regex: NVRM}\n"
    ruleset = load_ruleset(include_site=False, extra=[("site/a.yaml", rule), ("site/b.yaml", rule)])
    assert [str(p) for p in ruleset.quarantined] == [
        "site/b.yaml:1: duplicate rule id 'site.dup' (first defined at site/a.yaml:1)"]
    assert ruleset.get("site.dup") is not None and ruleset.get("site.dup").path == "site/a.yaml"  # type: ignore[union-attr]


def test_invalid_rule_reports_path_and_line_of_the_key() -> None:
    bad = b"id: site.bad\nversion: 1\nphase: extract\ntitle: t\ndescription: d\nmatch:\n  source: app\n" \
          b"  anchors: [oops]\n  regex: '(unclosed'\n"
    ruleset = load_ruleset(include_site=False, extra=[("site/bad.yaml", bad)])
    assert len(ruleset.quarantined) == 1
    assert str(ruleset.quarantined[0]).startswith("site/bad.yaml:9: match.regex does not compile")


def test_every_bundled_regex_compiles() -> None:
    """Bundled rules' regexes are compiled on first use (site rules' when loaded): this is their check."""
    extract = [r for r in load_ruleset(include_site=False).rules if r.match is not None]
    assert len(extract) > 50
    for rule in extract:
        assert rule.match is not None
        assert rule.match.regex.pattern == rule.match.pattern
        assert (rule.match.exclude is None) == (not rule.match.exclude_pattern)
        # the prefilter reads '(?i)' without compiling: it must agree with the compiled regex
        assert rule.match.ignores_case == bool(rule.match.regex.flags & re.IGNORECASE), rule.id


@pytest.mark.parametrize(("pattern", "flags"), [
    ("(?i)nvrm: xid", re.IGNORECASE),
    ("(?s)(?i)a.b", re.IGNORECASE | re.DOTALL),
    ("(?ax)a b", re.ASCII | re.VERBOSE),
    ("(?i:nvrm) xid", 0),  # scoped: not the whole regex's
    ("a(?i)", 0),  # not at the start: Python refuses to compile it, and it sets nothing here
    ("\\(?i)x", 0),
])
def test_leading_flags_reads_only_the_whole_patterns_flags(pattern: str, flags: int) -> None:
    assert leading_flags(pattern) == flags


HOSTILE_FILLERS = ("a" * 30000, "0:" * 15000, "[" * 30000, "a " * 15000, "x." * 15000, " " * 30000 + "x")
SEARCH_BUDGET_S = 1.0  # the slowest rule takes ~0.1 s on these lines; a backtracking one takes minutes


def test_no_rule_regex_backtracks_on_a_hostile_line() -> None:
    """A job prints what it likes: 64 KiB of one character around a rule's anchor must not make any rule's
    regex (or exclude) backtrack for minutes, which would hold up the finalizer on one line."""
    import signal
    import time

    from slurm_attrib.scan import MAX_TEXT_CHARS

    class _TooSlow(Exception):
        pass

    def _stop(*_args: object) -> None:
        raise _TooSlow()

    slow: list[str] = []
    previous = signal.signal(signal.SIGALRM, _stop)
    try:
        for rule in load_ruleset(include_site=False).rules:
            if rule.match is None:
                continue
            patterns = [p for p in (rule.match.regex, rule.match.exclude) if p is not None]
            for anchor in {a.rstrip("\n") for a in rule.match.anchors}:
                # one anchor in a sea of filler; the anchor itself repeated (a pattern that scans to the line's
                # end from every start); NCCL's 'host:pid:tid [dev] ' prefix repeated before it
                shapes = [(f"{anchor} {filler}", f"{anchor}{filler}{anchor}") for filler in HOSTILE_FILLERS]
                shapes.append((f"{anchor} 1 " * (30000 // (len(anchor) + 3)), "a:1:1 [0] " * 3000 + anchor))
                for pair in shapes:
                    for line in pair:
                        for pattern in patterns:
                            signal.setitimer(signal.ITIMER_REAL, SEARCH_BUDGET_S * 5)
                            started = time.perf_counter()
                            try:
                                pattern.search(line[:MAX_TEXT_CHARS])
                                took = time.perf_counter() - started
                            except _TooSlow:
                                took = SEARCH_BUDGET_S * 5
                            finally:
                                signal.setitimer(signal.ITIMER_REAL, 0)
                            if took > SEARCH_BUDGET_S:
                                slow.append(f"{rule.id}: {took:.1f} s on {line[:24]!r}...")
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert slow == []


def test_site_rules_directory_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "local.yaml").write_text(
        "id: site.disk_quota\nversion: 1\nphase: extract\ntitle: Disk quota\n"
        "description: the site's own quota message\nreferences: []\n"
        "match: {source: app, anchors: ['Disk quota exceeded'], regex: 'Disk quota exceeded'}\n"
        "emit: {kind: quota, role: candidate, category: storage, responsible: workload, strength: 50}\n")
    ruleset = load_ruleset(site_dir=str(tmp_path))
    rule = ruleset.get("site.disk_quota")
    assert rule is not None and rule.origin == "site" and ruleset.quarantined == ()


@pytest.mark.parametrize("log", baseline_logs(), ids=lambda log: log.name)
def test_clean_baseline_gives_no_verdict(engine: Engine, tmp_path: Path, log: BaselineLog) -> None:
    diag = engine.diagnose(write_bundle(log, tmp_path))
    assert diag.status == "unattributed" and diag.root_cause is None, diag.summary
    assert not [s for s in diag.supporting if s.role == "candidate"]


def test_baseline_takes_every_file_of_the_package_data() -> None:
    names = [log.name for log in baseline_logs()]
    assert "app/srun_label_vit_16tasks.out" in names and "kernel/dmesg_T_a100.log" in names
    assert len(names) == 7


def test_bundled_rules_find_only_context_in_the_baseline(engine: Engine) -> None:
    found = [(log.name, s.rule_id, s.role) for log, s in baseline_matches(engine) if s.role != "context"]
    assert found == []


def test_a_fixture_key_that_is_not_checked_fails(engine: Engine, tmp_path: Path) -> None:
    """A symptom's field written beside ``kind`` instead of under ``fields:`` was silently not checked."""
    fixture = tmp_path / "code_beside_kind.yaml"
    fixture.write_text(
        '# an Xid 79 whose code is expected at the wrong level\n'
        'job: {job_id: "1", cluster: demo, user: ana, partition: gpu, nodes: [node-01], state: FAILED, '
        'exit_code: "1:0", derived_exit_code: "0:0"}\n'
        "files:\n  syslog/node-01.log: |\n"
        "    Nov 20 10:00:00 node-01 kernel: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n"
        "expect:\n  kind: xid\n  code: 80\n")
    rule = engine.ruleset.get("kernel.nvidia_xid")
    assert rule is not None
    result = run_fixture(engine, rule, fixture, "positive")
    assert not result.passed and "not checked" in result.detail
