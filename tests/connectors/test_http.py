"""The connectors' HTTP client against a real server on loopback: retries, deadlines, caps, secrets."""

from __future__ import annotations

import base64
import socket
import time
from pathlib import Path

import pytest

from slurm_attrib.config import HttpConfig
from slurm_attrib.connectors.http import HttpClient, HttpFailure
from slurm_attrib.errors import ConfigError

from .replay import Answer, replay_server


def _client(url: str, sleeps: list[float], **settings: object) -> HttpClient:
    config = HttpConfig(url=url, **{"timeout_s": 2.0, "backoff_s": 0.25, **settings})  # type: ignore[arg-type]
    return HttpClient(config, sleep=sleeps.append)


def _secret(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text + "\n")
    path.chmod(0o600)
    return str(path)


def test_a_5xx_and_a_429_are_retried_with_backoff_and_retry_after() -> None:
    sleeps: list[float] = []
    with replay_server() as server:
        server.route("GET", "/api", Answer(503, "busy"), Answer(429, "slow", {"Retry-After": "3"}),
                     Answer(200, {"ok": True}))
        answer = _client(server.url, sleeps).get("/api", {"q": "x"})
    assert answer.json() == {"ok": True} and answer.tries == 3
    assert sleeps == [0.25, 3.0]


def test_a_4xx_is_final_and_says_what_the_server_said() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(400, {"error": "parse error at line 1, col 7"}))
        with pytest.raises(HttpFailure) as failure:
            _client(server.url, []).get("/api")
    assert failure.value.status == 400 and failure.value.tries == 1
    assert "HTTP 400" in str(failure.value) and "parse error" in str(failure.value)


def test_retries_are_spent_then_it_is_an_error() -> None:
    sleeps: list[float] = []
    with replay_server() as server:
        server.route("GET", "/api", Answer(502, "bad gateway"))
        with pytest.raises(HttpFailure) as failure:
            _client(server.url, sleeps, retries=2).get("/api")
    assert failure.value.state == "error" and failure.value.tries == 3 and sleeps == [0.25, 0.5]


def test_a_backend_that_hangs_is_a_timeout_within_the_deadline() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(200, {}, delay_s=3.0))
        client = HttpClient(HttpConfig(url=server.url, timeout_s=0.3, retries=5, backoff_s=0.1))
        began = time.monotonic()
        with pytest.raises(HttpFailure) as failure:
            client.get("/api", deadline=time.monotonic() + 1.0)
    assert failure.value.state == "timeout"
    assert time.monotonic() - began < 2.5


def test_a_body_that_trickles_past_the_deadline_is_cut() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(200, b"x" * 200_000, trickle_s=0.0005))
        client = HttpClient(HttpConfig(url=server.url, timeout_s=1.0, retries=0))
        with pytest.raises(HttpFailure) as failure:
            client.get("/api", deadline=time.monotonic() + 0.5)
    assert failure.value.state == "timeout"


def test_an_answer_larger_than_the_cap_is_refused() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(200, b"y" * 5000))
        with pytest.raises(HttpFailure, match="larger than the cap"):
            _client(server.url, [], max_bytes=4096).get("/api")


def test_a_refused_connection_is_retried_then_an_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    with pytest.raises(HttpFailure, match="connection failed") as failure:
        _client(f"http://127.0.0.1:{port}", sleeps, retries=1).get("/api")
    assert failure.value.tries == 2 and sleeps == [0.25]


def test_malformed_json_is_an_error_not_an_exception_of_another_kind() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(200, b'{"status": "success", "data": '))
        answer = _client(server.url, []).get("/api")
    with pytest.raises(HttpFailure, match="not JSON"):
        answer.json()


def test_redirects_are_not_followed() -> None:
    with replay_server() as server:
        server.route("GET", "/api", Answer(302, "", {"Location": "http://169.254.169.254/"}))
        with pytest.raises(HttpFailure, match="redirect not followed"):
            _client(server.url, []).get("/api")


def test_the_bearer_token_goes_in_a_header_and_never_into_a_message(tmp_path: Path) -> None:
    token = _secret(tmp_path, "token", "s3cr3t-token")
    with replay_server() as server:
        server.route("GET", "/api", Answer(403, "forbidden"))
        with pytest.raises(HttpFailure) as failure:
            _client(server.url, [], token_file=token, headers=(("X-Scope-OrgID", "hpc"),)).get("/api")
    sent = server.requests[0].headers
    assert sent["Authorization"] == "Bearer s3cr3t-token" and sent["X-Scope-OrgID"] == "hpc"
    assert "s3cr3t" not in str(failure.value)


def test_basic_auth_reads_the_password_from_a_root_only_file(tmp_path: Path) -> None:
    password = _secret(tmp_path, "password", "hunter2")
    with replay_server() as server:
        server.route("GET", "/api", Answer(200, {}))
        _client(server.url, [], username="attrib", password_file=password).get("/api")
    assert server.requests[0].headers["Authorization"] == "Basic " + base64.b64encode(b"attrib:hunter2").decode()


def test_a_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token = _secret(tmp_path, "token", "t")
    Path(token).chmod(0o644)
    with pytest.raises(ConfigError, match="only its owner"):
        HttpClient(HttpConfig(url="http://127.0.0.1:1", token_file=token))


@pytest.mark.parametrize("url", ["", "file:///etc/passwd", "127.0.0.1:3100"])
def test_a_url_that_is_not_http_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError):
        HttpClient(HttpConfig(url=url))
