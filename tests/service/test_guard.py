"""Tokens, trusted networks and the rate limiter on their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.errors import ConfigError
from slurm_attrib.service.guard import TOKEN_ENV, RateLimiter, Tokens, address_in, networks, read_token_file


def test_token_file_and_environment(tmp_path: Path) -> None:
    file = tmp_path / "tokens"
    file.write_text("# comment\n\n  alpha  \nbeta\n")
    file.chmod(0o600)
    tokens = Tokens.load(str(file), {TOKEN_ENV: " gamma "})
    assert [t.decode() for t in tokens.values] == ["alpha", "beta", "gamma"]
    assert tokens.accepts("Bearer alpha") and tokens.accepts("bearer gamma")
    for header in (None, "", "Bearer", "Bearer alph", "Basic alpha", "Bearer alpha2", "alpha"):
        assert not tokens.accepts(header), header
    assert Tokens.load(str(tmp_path / "absent"), {}).values == ()
    assert not Tokens().accepts("Bearer ")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    file = tmp_path / "tokens"
    file.write_text("alpha\n")
    file.chmod(mode)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_token_file(str(file))


def test_a_linked_token_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.write_text("alpha\n")
    real.chmod(0o600)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(ConfigError):
        read_token_file(str(tmp_path / "link"))


def test_networks() -> None:
    nets = networks(["10.0.0.0/16", "::1/128"])
    assert address_in("10.0.3.4", nets) and address_in("::1", nets)
    assert not address_in("10.1.0.1", nets) and not address_in("", nets) and not address_in("host", nets)
    assert not address_in("127.0.0.1", ())
    with pytest.raises(ConfigError, match="node_networks"):
        networks(["10.0.0.0/33"])


def test_rate_limiter_refills_with_time() -> None:
    now = [0.0]
    limiter = RateLimiter(2.0, 3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("b")  # per address
    now[0] = 0.5
    assert limiter.allow("a") and not limiter.allow("a")
    assert all(RateLimiter(0.0, 1).allow("a") for _ in range(100))  # 0: no limit
