"""``watch``: discover finished workloads (Slurm, Kueue, a static inventory), collect their evidence
through the configured connectors, diagnose, and hand each verdict to the sinks. Option parsing and
wiring only; the orchestrator is :mod:`slurm_attrib.watch.orchestrate`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..errors import AttribError, ConfigError
from .common import add_rule_options, command, config_of, engine_of, now_of

if TYPE_CHECKING:  # the orchestrator and its parts load when `watch` runs, not with every command
    from ..attribution import VerdictStore
    from ..config import Config
    from ..connectors.base import EvidenceSource
    from ..watch import Discovery
    from ..watch.orchestrate import Outcome
    from ..watch.sinks import Sink

log = logging.getLogger("slurm_attrib.watch")
SOURCES = ("slurm", "kueue", "static")
SINKS = ("stdout", "store", "annotate", "service")


def connector(name: str, config: Config) -> EvidenceSource:
    """The connector ``name`` as the configuration describes it; one whose extra is missing is a
    ``skipped`` line that names the extra."""
    from ..connectors.base import DisabledSource

    factories: dict[str, Callable[[], EvidenceSource]] = {
        "files": _files,
        "loki": lambda: _loki(config),
        "prometheus": lambda: _prometheus(config),
        "kubernetes": lambda: _kubernetes(config),
    }
    if name not in factories:
        raise ConfigError(f"watch.connectors: {name!r} is not one of {', '.join(sorted(factories))}")
    try:
        return factories[name]()
    except ImportError as exc:
        return DisabledSource(name, f"needs the extra: pip install 'slurm-attrib[connectors]' ({exc})")


def _files() -> EvidenceSource:
    from ..connectors.files import FilesSource

    return FilesSource()


def _loki(config: Config) -> EvidenceSource:
    import requests  # noqa: F401  (the extra; the connector imports it per request)

    from ..connectors.loki import LokiSource

    return LokiSource(config.loki)


def _prometheus(config: Config) -> EvidenceSource:
    import requests  # noqa: F401  (the extra)

    from ..connectors.prometheus import PrometheusSource

    return PrometheusSource(config.prometheus)


def _kubernetes(config: Config) -> EvidenceSource:
    from ..connectors.base import DisabledSource
    from ..connectors.kubernetes import PodLogSource

    if not config.kubernetes.enabled:
        return DisabledSource("kubernetes", "kubernetes.enabled is false")
    return PodLogSource.from_config(config.kubernetes)


def discovery(args: argparse.Namespace, config: Config) -> Discovery:
    before = timedelta(seconds=config.watch.window_before_s)
    after = timedelta(seconds=config.watch.window_after_s)
    if args.source == "static":
        if not args.inventory:
            raise ConfigError("--source static needs --inventory FILE")
        from ..watch.static import StaticDiscovery

        return StaticDiscovery(args.inventory, config.cluster, before, after,
                               timedelta(seconds=config.watch.lookback_s))
    if args.source == "slurm":
        from ..slurm.access import open_slurm
        from ..watch.slurm import SlurmDiscovery

        return SlurmDiscovery(open_slurm(config.finalizer.backend, config.finalizer.command_timeout_s,
                                         cluster=config.cluster), before, after)
    try:
        from ..watch.kueue import KueueDiscovery

        return KueueDiscovery.from_config(config)
    except ImportError as exc:
        raise ConfigError(f"--source kueue needs the extra: pip install 'slurm-attrib[connectors]' ({exc})") from None


def sinks(names: list[str], config: Config, store: Optional[VerdictStore]) -> list[Sink]:
    """The sinks ``names`` (``store`` is required for the sink of that name)."""
    from ..config import HttpConfig
    from ..watch.sinks import AnnotateSink, ServiceSink, StoreSink

    out: list[Sink] = []
    for name in names:
        if name == "store":
            assert store is not None
            out.append(StoreSink(store))
        elif name == "annotate":
            out.append(AnnotateSink())
        elif name == "service":
            if not config.watch.service_url:
                raise ConfigError("the service sink needs watch.service_url")
            out.append(ServiceSink(HttpConfig(url=config.watch.service_url,
                                              token_file=config.watch.service_token_file)))
        elif name != "stdout":
            raise ConfigError(f"sink {name!r} is not one of {', '.join(SINKS)}")
    return out


def cmd_watch(args: argparse.Namespace) -> int:
    from ..watch.orchestrate import Orchestrator, SeenState, window_of

    config = config_of(args)
    names = args.sink or list(config.watch.sinks)
    if args.source == "kueue" and config.kubernetes.annotate and "annotate" not in names:
        names.append("annotate")  # kubernetes.annotate: the verdict goes onto the Workload
    store: Optional[VerdictStore] = None
    if "store" in names:  # one store: the history each diagnosis reads, and the sink that records it
        from ..attribution import SqliteVerdictStore

        store = SqliteVerdictStore(config.store, os.path.join(config.spool.dir, "verdicts"),
                                   config.finalizer.store_write_budget_s)
    orchestrator = Orchestrator(
        discovery=discovery(args, config),
        connectors=[connector(name, config) for name in config.watch.connectors],
        engine=engine_of(args, config), sinks=sinks(names, config, store),
        seen=SeenState("" if args.no_state else (args.state or config.watch.state_file)),
        now=lambda: now_of(args), budget_s=config.watch.connector_budget_s)
    if store is not None:
        orchestrator.diagnose = _with_history(config, store)
    failed = False
    while True:
        since, until = window_of(now_of(args), config.watch.lookback_s)
        try:
            for outcome in orchestrator.round(since, until):
                failed = failed or bool(outcome.error)
                _print(outcome, args.format, "stdout" in names)
        except AttribError as exc:  # discovery could not ask its backend: the next round asks again
            if args.once:
                raise
            log.warning("discovery failed: %s; next round in %g s", exc, config.watch.interval_s)
        if args.once:
            return 1 if failed else 0
        time.sleep(config.watch.interval_s)


def _with_history(config: Config, store: VerdictStore) -> Callable[[Any, Path, Any], dict[str, Any]]:
    """Diagnose with the store's history of the workload's nodes (repeat offenders), as the finalizer does."""
    from ..attribution import attribute

    def diagnose(engine: Any, bundle: Path, verdict_time: Any) -> dict[str, Any]:
        return attribute(engine, bundle, store, verdict_time, config.finalizer.history_days,
                         record=False).diagnosis.to_dict()

    return diagnose


def _print(outcome: Outcome, fmt: str, stdout: bool) -> None:
    from .. import canonical
    from ..termsafe import for_terminal

    if outcome.error:
        sys.stderr.write(f"slurm-attrib: {for_terminal(outcome.key)}: no verdict: {for_terminal(outcome.error)}\n")
    if fmt == "json":
        if stdout and outcome.diagnosis is not None:
            sys.stdout.write(canonical.dumps(outcome.diagnosis, indent=None))  # one line, newline-ended
        sys.stdout.flush()
        return
    diag = outcome.diagnosis or {}
    lines = [f"{outcome.key}: {diag.get('status', 'error')} {diag.get('category', '')} "
             f"{diag.get('summary', '')}".rstrip()] if stdout or outcome.error else []
    if stdout:
        lines += [f"  {c.source}: {c.state}" + (f" ({c.reason})" if c.reason else "") for c in outcome.coverage]
        lines += [f"  -> {done}" for done in outcome.sinks]
    if lines:
        sys.stdout.write(for_terminal("\n".join(lines), keep="\n") + "\n")
        sys.stdout.flush()


def register(sub: Any) -> None:
    parser = command(sub, "watch", cmd_watch, "discover finished workloads, collect, diagnose, deliver",
                     "Discover finished workloads (sacct, Kueue Workloads, or a static inventory), collect their "
                     "evidence through the configured connectors (watch.connectors: files, loki, prometheus, "
                     "kubernetes), diagnose, and hand each verdict to the sinks (stdout, store, annotate, service). "
                     "A workload is diagnosed once (watch.state_file).")
    parser.add_argument("--source", choices=SOURCES, required=True,
                        help="where workloads come from: sacct, finished Kueue Workloads, or --inventory")
    parser.add_argument("--inventory", help="the static inventory (YAML) for --source static")
    parser.add_argument("--once", action="store_true", help="one discovery round, then exit (1 if a workload failed)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: one canonical Diagnosis per line")
    parser.add_argument("--sink", action="append", choices=SINKS, help="instead of watch.sinks (repeatable)")
    parser.add_argument("--state", help="seen-workloads file instead of watch.state_file")
    parser.add_argument("--no-state", action="store_true", help="remember nothing between runs")
    parser.add_argument("--now", help="the current time (ISO), for replaying incidents")
    add_rule_options(parser)
