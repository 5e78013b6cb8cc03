"""``rules list|lint|test``: the rule set the configuration loads, its checks and its fixtures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

from .. import canonical
from ..config import Config
from ..errors import AttribError, ConfigError
from ..ruleset import site_fixtures_dir, site_rules_dir
from .common import EXIT_RULES_FAILED, add_rule_options, config_of, engine_of


def cmd_rules_list(args: argparse.Namespace) -> int:
    engine = engine_of(args)
    rows = [(r.phase + (f"/{r.stage}" if r.stage else ""), r.id, f"v{r.version}", r.origin, r.title)
            for r in engine.ruleset.rules]
    if args.format == "json":
        sys.stdout.write(canonical.dumps([{"phase": p, "id": i, "version": v, "origin": o, "title": t}
                                          for p, i, v, o, t in rows]))
        return 0
    width = max(len(r[1]) for r in rows) if rows else 10
    for phase, rid, version, origin, title in rows:
        sys.stdout.write(f"{phase:<18} {rid:<{width}} {version:<4} {origin:<8} {title}\n")
    sys.stdout.write(f"{len(rows)} rules, ruleset hash {engine.ruleset.digest}\n")
    return 0


def _origin(args: argparse.Namespace) -> Optional[str]:
    if args.origin == "site" and args.no_site_rules:
        raise ConfigError("--origin site checks the site rules: it cannot go with --no-site-rules")
    return str(args.origin) if args.origin else None


def _fixtures_dir(args: argparse.Namespace, origin: Optional[str], config: Config) -> Optional[Path]:
    """--fixtures, else the site's fixtures next to its rules (--origin site), else ./tests/rules."""
    if args.fixtures:
        return Path(args.fixtures)
    if origin == "site":
        return site_fixtures_dir(str(site_rules_dir(args.rules_dir, config.rules_dir)))
    default = Path("tests/rules")
    return default if default.is_dir() else None


def cmd_rules_lint(args: argparse.Namespace) -> int:
    from ..rulelint import lint

    origin, config = _origin(args), config_of(args)
    engine = engine_of(args, config)
    issues = lint(engine.ruleset, _fixtures_dir(args, origin, config), origin)
    for issue in issues:
        sys.stdout.write(f"{issue}\n")
    errors = sum(1 for i in issues if i.severity == "error")
    checked = sum(1 for r in engine.ruleset.rules if origin is None or r.origin == origin)
    quarantined = f", {len(engine.ruleset.quarantined)} quarantined" if origin != "bundled" else ""
    sys.stdout.write(f"{checked} {origin + ' ' if origin else ''}rules{quarantined}, {errors} error(s), "
                     f"{len(issues) - errors} warning(s)\n")
    return EXIT_RULES_FAILED if errors else 0


def cmd_rules_test(args: argparse.Namespace) -> int:
    from ..ruletest import run_all

    origin, config = _origin(args), config_of(args)
    root = _fixtures_dir(args, origin, config)
    if root is None:
        raise AttribError("no fixtures directory: pass --fixtures DIR (default ./tests/rules, or the site's "
                          "rules.d/fixtures with --origin site)")
    results = run_all(engine_of(args, config), root, args.rule, origin)
    failed = [r for r in results if not r.passed]
    for res in results:
        if args.verbose or not res.passed:
            sys.stdout.write(f"{'ok  ' if res.passed else 'FAIL'} {res.rule_id} {res.kind} {res.path}"
                             f"{': ' + res.detail if res.detail else ''}\n")
    sys.stdout.write(f"{len(results) - len(failed)} passed, {len(failed)} failed\n")
    return EXIT_RULES_FAILED if failed else 0


def register(sub: Any) -> None:
    rules = sub.add_parser("rules", help="list, lint and test rules", description="Work with the rule set.")
    rsub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    for name, func, text in (("list", cmd_rules_list, "list the loaded rules in execution order"),
                             ("lint", cmd_rules_lint, "check every rule (metadata, regexes, kinds, fixtures, the clean "
                              "baseline) and report quarantined site rule files"),
                             ("test", cmd_rules_test, "run every rule's positive and negative fixtures")):
        p = rsub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        add_rule_options(p)
        if name == "list":
            p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
        else:
            p.add_argument("--origin", choices=("bundled", "site"), help="only the bundled rules or only the "
                           "site's (default: all)")
            p.add_argument("--fixtures", help="fixtures directory (default ./tests/rules; with --origin site, "
                           "fixtures/ in the site rules directory)")
        if name == "test":
            p.add_argument("--rule", help="test only this rule id")
            p.add_argument("-v", "--verbose", action="store_true", help="list passing fixtures too")
        p.set_defaults(func=func)
