"""Several server processes (``service.processes``): uvicorn starts each with :func:`app_from_environment`,
which builds the service from what ``serve`` put in the environment (the configuration file, the store,
the rules options and the fixed clock), so every process answers alike. The store is shared (SQLite,
read-only for reads); the diagnosis latency histogram is summed across them
(``$PROMETHEUS_MULTIPROC_DIR``); the rate limit and the engine pool are each process's own."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any, Optional

from fastapi import FastAPI

from ..config import load_config
from ..engine import Engine
from ..store.timespec import parse_when
from .app import create_app
from .context import Service

ENV = "SLURM_ATTRIB_SERVE"
__all__ = ["ENV", "app_from_environment", "describe"]


def describe(config_path: Optional[str], store_path: str, rules_dir: Optional[str], include_site: bool,
             now: Optional[datetime]) -> str:
    """What a worker needs to build the service, as the JSON ``serve`` puts in :data:`ENV`."""
    return json.dumps({"config": config_path, "store": store_path, "rules_dir": rules_dir,
                       "include_site": include_site, "now": now.isoformat() if now else ""}, sort_keys=True)


def app_from_environment() -> FastAPI:
    """The application of one worker process (uvicorn ``--factory``)."""
    raw: dict[str, Any] = json.loads(os.environ[ENV])
    config = load_config(raw["config"])

    def engine() -> Engine:
        return Engine.from_config(config, rules_dir=raw["rules_dir"], include_site=bool(raw["include_site"]))

    service = Service.from_config(config, str(raw["store"]), engine)
    if raw["now"]:
        fixed = parse_when(str(raw["now"]), datetime.now().astimezone())
        service.clock = lambda: fixed
    service.engines.warm()
    return create_app(service)
