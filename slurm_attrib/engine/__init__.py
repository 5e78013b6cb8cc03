"""The deterministic rule engine: extract → filter → refine (correlate, classify, demote) → FINAL →
POST_OUTCOME → report. One :class:`Engine` loads its rules once and diagnoses many bundles."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Optional, Union

from .. import __version__
from ..bundle import Bundle, load_bundle
from ..config import Config
from ..errors import RuleError
from ..model import Diagnosis
from ..ruleset import Rule, RuleSet, load_ruleset, python_part_problem, site_rules_dir
from ..timestamps import parse_line_time
from . import registry
from .context import EngineContext, EngineSettings
from .extract import Extractor
from .filters import run_declarative_filter
from .outcome import run_declarative_post
from .ranks import split_rank
from .report import build_diagnosis
from .timeinfer import time_context

__all__ = ["Engine", "EngineSettings", "diagnose_path"]


class Engine:
    """Rules loaded and prefilters compiled once; :meth:`diagnose` is pure in its input."""

    def __init__(self, ruleset: Optional[RuleSet] = None, settings: Optional[EngineSettings] = None) -> None:
        registry.load_all()
        self.ruleset = ruleset or load_ruleset()
        self.settings = settings or EngineSettings()
        _check_implementations(self.ruleset)
        self.extractor = Extractor(self.ruleset.by_phase("extract"))

    @classmethod
    def from_config(cls, config: Config, rules_dir: Optional[str] = None, include_site: bool = True) -> Engine:
        """The engine a configuration describes: the bundled rules, the site rules of ``rules_dir`` (else
        ``$SLURM_ATTRIB_RULES_D``, else ``config.rules_dir``) and the tolerances of ``config.engine``.

        Every command, the finalizer and the service build their engine here, so one configuration gives
        one ruleset digest and one set of tolerances wherever a verdict is made or re-made."""
        site_dir = str(site_rules_dir(rules_dir, config.rules_dir))
        return cls(load_ruleset(site_dir=site_dir, include_site=include_site), config.engine)

    def diagnose(self, bundle: Union[Bundle, str, os.PathLike[str]],
                 settings: Optional[EngineSettings] = None) -> Diagnosis:
        """The Diagnosis of one bundle (a loaded Bundle or a directory)."""
        return build_diagnosis(self.run(bundle, settings), __version__)

    def run(self, bundle: Union[Bundle, str, os.PathLike[str]],
            settings: Optional[EngineSettings] = None) -> EngineContext:
        """Run every phase and return the whole context (symptoms, fired rules, outcome)."""
        if not isinstance(bundle, Bundle):
            bundle = load_bundle(bundle)
        ctx = EngineContext(bundle=bundle, ruleset=self.ruleset, settings=settings or self.settings)
        _job_coverage(ctx)
        _rules_coverage(ctx)
        ctx.window_start, ctx.window_end = bundle.job.start, bundle.job.end
        ctx.window_source = "job" if (ctx.window_start or ctx.window_end) else ""
        self.extractor.run(ctx)
        if not ctx.window_source:
            _window_from_evidence(ctx)
        ctx.order()
        for phase in ("filter", "refine", "final", "post_outcome"):
            for rule in self.ruleset.by_phase(phase):
                count = _run_rule(ctx, rule)
                if count:
                    ctx.fired[rule.id] += count
            if phase == "filter":
                ctx.filtered()
        return ctx


def _run_rule(ctx: EngineContext, rule: Rule) -> int:
    if rule.implementation == "python":
        return registry.RULES[rule.id](ctx, rule)
    if rule.phase == "filter":
        return run_declarative_filter(ctx, rule)
    if rule.phase == "post_outcome":
        return run_declarative_post(ctx, rule)
    raise RuleError(f"{rule.where}: a declarative 'when' rule is only supported in filter and post_outcome")


def _check_implementations(ruleset: RuleSet) -> None:
    """The loader quarantines site rules whose Python parts are missing; a bundled one is a bug."""
    for rule in ruleset.rules:
        problem = python_part_problem(rule)
        if problem is not None:
            raise RuleError(str(problem))


def _job_coverage(ctx: EngineContext) -> None:
    cov = ctx.coverage_for("job_facts")
    job_problems = [p for p in ctx.bundle.problems if p.startswith("job.yaml")]
    cov.state = "error" if any("missing" in p or "invalid" in p or "unreadable" in p for p in job_problems) \
        else "ok"
    cov.files = 0 if cov.state == "error" else 1
    cov.notes.extend(ctx.bundle.problems)
    if cov.state == "error":
        cov.reason = "job.yaml missing or unreadable: job facts unknown"


def _rules_coverage(ctx: EngineContext) -> None:
    """Site rule files the loader quarantined did not judge this bundle: the verdict says so."""
    problems = ctx.ruleset.quarantined
    if not problems:
        return
    cov = ctx.coverage_for("rules")
    cov.state = "error"
    cov.reason = f"{len(problems)} site rule file(s) quarantined, not running (see `slurm-attrib rules lint`)"
    cov.notes.extend(str(p) for p in problems)


def _window_from_evidence(ctx: EngineContext) -> None:
    """No start/end in job.yaml: take the window from the absolute times of the evidence, then
    resolve the stamps that needed a window (no year)."""
    times = sorted(s.time for s in ctx.symptoms if s.time is not None)
    if not times:
        return
    ctx.window_start, ctx.window_end, ctx.window_source = times[0], times[-1], "evidence"
    ctx.assumptions.add("job window taken from the evidence: "
                        f"{_iso(times[0])} .. {_iso(times[-1])}")
    for sym in ctx.symptoms:
        if sym.time is None and sym.evidence:
            source = sym.evidence[0].source
            text = split_rank(sym.evidence[0].raw)[1] if source == "app" else sym.evidence[0].raw
            stamp = parse_line_time(text, time_context(ctx, sym.node))
            if stamp.time is not None:
                sym.time = stamp.time
                ctx.assumptions.update(stamp.assumptions)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def diagnose_path(path: Union[str, os.PathLike[str]]) -> Diagnosis:
    """Convenience: diagnose one bundle directory with the bundled and site rules."""
    return Engine().diagnose(path)
