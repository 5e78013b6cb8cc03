"""``serve``: the attribution service (REST API, node-bundle receiver, metrics, dashboard) under
uvicorn. Option parsing only; the service is :mod:`slurm_attrib.service`. Needs the ``service`` extra
(``pip install 'slurm-attrib[service]'``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..store import db as store_db
from .common import add_rule_options, command, config_of, engine_of, now_of

DEMO_NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)  # just after the demo and golden jobs ended


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..service import Service, create_app
    except ImportError as exc:
        raise ConfigError(f"the service needs its extra: pip install 'slurm-attrib[service]' ({exc})") from None
    config = config_of(args)
    host = args.host or config.service.host
    port = config.service.port if args.port is None else args.port
    with tempfile.TemporaryDirectory(prefix="slurm-attrib-demo-") as scratch:
        store_path = store_db.resolve_store_path(args.store, configured=config.store.path)
        if args.demo:
            from ..service.demo import fill_demo_store

            store_path = str(fill_demo_store(engine_of(args, config), Path(scratch),
                                             now_of(args) if args.now else DEMO_NOW))
            sys.stderr.write(f"slurm-attrib: demo store {store_path}\n")
        service = Service.from_config(config, store_path, lambda: engine_of(args, config))
        if args.now or args.demo:  # a fixed "now": the overview's windows end there
            fixed = now_of(args) if args.now else DEMO_NOW
            service.clock = lambda: fixed
        service.engines.warm()  # rule errors show now, not at the first request
        problem = service.prepare_store()
        if problem:
            sys.stderr.write(f"slurm-attrib: warning: serving reads only: {problem}\n")
        certfile, keyfile = config.service.ssl_certfile or None, config.service.ssl_keyfile or None
        sys.stderr.write(f"slurm-attrib: serving on http{'s' if certfile else ''}://{host}:{port}/\n")
        if not certfile and host not in ("127.0.0.1", "::1", "localhost"):
            sys.stderr.write("slurm-attrib: warning: listening beyond loopback without TLS: tokens and verdicts "
                             "cross the network in clear (service.ssl_certfile, or a reverse proxy)\n")
        sys.stderr.flush()
        logging.basicConfig(level=logging.INFO)
        options: dict[str, Any] = dict(host=host, port=port, log_level=args.log_level, access_log=args.access_log,
                                       proxy_headers=False, server_header=False, ssl_certfile=certfile,
                                       ssl_keyfile=keyfile)
        processes = max(1, config.service.processes)
        if processes == 1:
            uvicorn.run(create_app(service), **options)
            return 0
        from ..service import metrics, workers

        shared = Path(scratch) / "metrics"  # the processes' histogram files, summed at each scrape
        shared.mkdir()
        os.environ[metrics.MULTIPROC_ENV] = str(shared)
        os.environ[workers.ENV] = workers.describe(args.config, store_path, args.rules_dir, not args.no_site_rules,
                                                   now_of(args) if args.now else (DEMO_NOW if args.demo else None))
        uvicorn.run(f"{workers.__name__}:app_from_environment", factory=True, workers=processes, **options)
    return 0


def register(sub: Any) -> None:
    serve = command(sub, "serve", cmd_serve, "run the attribution service (REST API, metrics, dashboard)",
                    "Serve the REST API (POST bundles for a diagnosis, receive node bundles from the epilogs, "
                    "read the store), /metrics for Prometheus and the read-only dashboard. Listens on "
                    "127.0.0.1:8470 unless told otherwise (config section service:). --demo serves a "
                    "temporary store filled with the bundled demo and the golden cases.")
    serve.add_argument("--host", help="listen address (default: the configuration's service.host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default: the configuration's service.port, 8470; 0: any)")
    serve.add_argument("--demo", action="store_true", help="serve a temporary store with the demo verdicts")
    serve.add_argument("--store", help=f"the store (default ${store_db.STORE_ENV}, else the configuration's "
                                       "store.path)")
    serve.add_argument("--now", help="take this ISO time as now: the verdict time of recorded verdicts and the end of "
                       "the dashboard's windows (default: the clock; with --demo, the demo's 2026-12-01)")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                       help="server log level")
    serve.add_argument("--access-log", action="store_true", help="log every request")
    add_rule_options(serve)
