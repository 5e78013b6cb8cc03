"""TLS by uvicorn's own options (``service.ssl_certfile``/``ssl_keyfile``): the same API over https."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from .conftest import start_server

OPENSSL = shutil.which("openssl")


@pytest.mark.skipif(OPENSSL is None, reason="openssl (to make a test certificate) is not installed")
def test_the_service_speaks_tls_with_the_configured_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([str(OPENSSL), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    context = ssl.create_default_context(cafile=str(cert))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    server = start_server(tmp_path / "srv", config_extra=f"  ssl_certfile: {cert}\n  ssl_keyfile: {key}\n",
                          scheme="https", opener=opener)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        reply = server.call("GET", "/v1/rules")
        assert reply.status == 200 and reply.json()
        # plain http on the TLS port gets no answer it could read
        with pytest.raises((OSError, http.client.HTTPException)):
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                server.url.replace("https://", "http://") + "/healthz", timeout=5).read()
    finally:
        server.stop()
