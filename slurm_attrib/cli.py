"""The ``slurm-attrib`` command line: option parsing and output formatting only; every command is
a call into the library. One place maps exceptions to messages and exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

from . import __version__, canonical, cli_node, cli_slurm, cli_store
from .errors import AttribError
from .render import render_text

EXIT_USAGE = 2
EXIT_RULES_FAILED = 1


def _engine(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .engine import Engine
    from .ruleset import load_ruleset

    ruleset = load_ruleset(site_dir=args.rules_dir, include_site=not args.no_site_rules)
    return Engine(ruleset)


def _print_diagnosis(diag_dict: dict[str, object], text: str, fmt: str) -> None:
    sys.stdout.write(canonical.dumps(diag_dict) if fmt == "json" else text)


def cmd_diagnose(args: argparse.Namespace) -> int:
    diag = _engine(args).diagnose(args.bundle)
    _print_diagnosis(diag.to_dict(), render_text(diag) if args.format == "text" else "", args.format)
    return 0


def demo_bundle() -> Path:
    """The bundled demo case: the NVLink fault of DESIGN.md §1 (XID 149 on node-02)."""
    return Path(str(resources.files("slurm_attrib.data") / "demo"))


def cmd_demo(args: argparse.Namespace) -> int:
    bundle = demo_bundle()
    diag = _engine(args).diagnose(bundle)
    if args.format == "text":
        sys.stdout.write(f"demo bundle: {bundle}\n\n")
    _print_diagnosis(diag.to_dict(), render_text(diag) if args.format == "text" else "", args.format)
    return 0


def cmd_rules_list(args: argparse.Namespace) -> int:
    engine = _engine(args)
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


def _fixtures_dir(args: argparse.Namespace) -> Optional[Path]:
    if args.fixtures:
        return Path(args.fixtures)
    default = Path("tests/rules")
    return default if default.is_dir() else None


def cmd_rules_lint(args: argparse.Namespace) -> int:
    from .rulelint import lint

    engine = _engine(args)
    issues = lint(engine.ruleset, _fixtures_dir(args))
    for issue in issues:
        sys.stdout.write(f"{issue}\n")
    errors = sum(1 for i in issues if i.severity == "error")
    sys.stdout.write(f"{len(engine.ruleset.rules)} rules, {errors} error(s), {len(issues) - errors} warning(s)\n")
    return EXIT_RULES_FAILED if errors else 0


def cmd_rules_test(args: argparse.Namespace) -> int:
    from .ruletest import run_all

    root = _fixtures_dir(args)
    if root is None:
        raise AttribError("no fixtures directory: pass --fixtures DIR (default ./tests/rules)")
    results = run_all(_engine(args), root, args.rule)
    failed = [r for r in results if not r.passed]
    for res in results:
        if args.verbose or not res.passed:
            sys.stdout.write(f"{'ok  ' if res.passed else 'FAIL'} {res.rule_id} {res.kind} {res.path}"
                             f"{': ' + res.detail if res.detail else ''}\n")
    sys.stdout.write(f"{len(results) - len(failed)} passed, {len(failed)} failed\n")
    return EXIT_RULES_FAILED if failed else 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate import evaluate, render

    report = evaluate(_engine(args), Path(args.corpus))
    sys.stdout.write(canonical.dumps(report.to_dict()) if args.format == "json" else render(report, args.verbose))
    failed = report.accuracy < args.min_accuracy or len(report.false_accusations) > args.max_false_accusations
    if failed and args.format == "text":
        sys.stdout.write(f"FAILED: needs accuracy >= {100 * args.min_accuracy:g}% and at most "
                         f"{args.max_false_accusations} false accusation(s)\n")
    return EXIT_RULES_FAILED if failed else 0


def _add_rule_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rules-dir", help="site rules directory (default /etc/slurm-attrib/rules.d "
                                            "or $SLURM_ATTRIB_RULES_D)")
    parser.add_argument("--no-site-rules", action="store_true", help="use the bundled rules only")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slurm-attrib", description="Deterministic failure attribution "
                                     "for GPU training jobs on Slurm.")
    parser.add_argument("--version", action="version", version=f"slurm-attrib {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    diag = sub.add_parser("diagnose", help="diagnose one evidence bundle", description="Run the rule engine "
                          "on an evidence bundle directory and print the diagnosis.")
    diag.add_argument("--bundle", required=True, help="the bundle directory (job.yaml, applog/, syslog/ ...)")
    diag.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    _add_rule_options(diag)
    diag.set_defaults(func=cmd_diagnose)

    demo = sub.add_parser("demo", help="diagnose the built-in demo bundle",
                          description="Diagnose the bundled demo case (an NVLink fault on node-02).")
    demo.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    _add_rule_options(demo)
    demo.set_defaults(func=cmd_demo)

    rules = sub.add_parser("rules", help="list, lint and test rules", description="Work with the rule set.")
    rsub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    for name, func, text in (("list", cmd_rules_list, "list the loaded rules in execution order"),
                             ("lint", cmd_rules_lint, "check every rule (metadata, regexes, fixtures)"),
                             ("test", cmd_rules_test, "run every rule's positive and negative fixtures")):
        p = rsub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _add_rule_options(p)
        if name == "list":
            p.add_argument("--format", choices=("table", "json"), default="table", help="output format")
        else:
            p.add_argument("--fixtures", help="fixtures directory (default ./tests/rules)")
        if name == "test":
            p.add_argument("--rule", help="test only this rule id")
            p.add_argument("-v", "--verbose", action="store_true", help="list passing fixtures too")
        p.set_defaults(func=func)
    ev = sub.add_parser("eval", help="score the engine on a labelled corpus",
                        description="Diagnose every case of a corpus (folders with case.yaml, see "
                        "corpus/README.md) and score the verdicts against their labels: accuracy per family, "
                        "confusion by category, false accusations, unattributed rate. Exit 1 below the bars.")
    ev.add_argument("corpus", help="the corpus directory")
    ev.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    ev.add_argument("--min-accuracy", type=float, default=0.9, help="fail below this share right (default 0.9)")
    ev.add_argument("--max-false-accusations", type=int, default=0, help="fail above this many (default 0)")
    ev.add_argument("-v", "--verbose", action="store_true", help="list every case, not only the wrong ones")
    _add_rule_options(ev)
    ev.set_defaults(func=cmd_eval)
    cli_store.register(sub)
    cli_slurm.register(sub)
    cli_node.register_node(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Optional[Callable[[argparse.Namespace], int]] = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return func(args)
    except AttribError as exc:
        if args.debug:
            raise
        sys.stderr.write(f"slurm-attrib: error: {exc}\n")
        return exc.exit_code
    except (OSError, ValueError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"slurm-attrib: error: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
