"""The attribution service: a REST API (diagnose a posted bundle, receive node bundles, read the
store), Prometheus metrics and a read-only dashboard, one ASGI application (FastAPI) run by
``slurm-attrib serve``. Needs the ``service`` extra."""

from .app import create_app
from .context import Service

__all__ = ["Service", "create_app"]
