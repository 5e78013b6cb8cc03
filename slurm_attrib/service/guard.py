"""Who may do what, and how often: bearer tokens (a root-only file plus ``$SLURM_ATTRIB_SERVICE_TOKEN``,
compared in constant time), the networks whose epilogs may send node bundles without one, and a token
bucket per client address."""

from __future__ import annotations

import hmac
import ipaddress
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from ..errors import ConfigError
from ..tokenfile import read_token_file

TOKEN_ENV = "SLURM_ATTRIB_SERVICE_TOKEN"
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


@dataclass(frozen=True)
class Tokens:
    """The bearer tokens that may write (and read, when reads need one)."""

    values: tuple[bytes, ...] = ()

    @classmethod
    def load(cls, token_file: str, environ: Optional[dict[str, str]] = None) -> Tokens:
        env = os.environ if environ is None else environ
        found = read_token_file(token_file) if token_file else []
        if env.get(TOKEN_ENV, "").strip():
            found.append(env[TOKEN_ENV].strip())
        return cls(tuple(t.encode("utf-8") for t in found))

    def accepts(self, authorization: Optional[str]) -> bool:
        """Whether an ``Authorization: Bearer <token>`` header carries one of ours. Every token is compared,
        each in constant time, so the answer's timing does not say which one came close."""
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return False
        offered = given.strip().encode("utf-8")
        matched = False
        for token in self.values:
            matched |= hmac.compare_digest(token, offered)
        return matched


def networks(cidrs: Iterable[str]) -> tuple[Network, ...]:
    """The configured CIDRs; ConfigError naming a bad one."""
    out = []
    for text in cidrs:
        try:
            out.append(ipaddress.ip_network(str(text), strict=False))
        except ValueError as exc:
            raise ConfigError(f"service.node_networks: {exc}") from None
    return tuple(out)


def address_in(address: Optional[str], nets: tuple[Network, ...]) -> bool:
    if not address or not nets:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in nets)


@dataclass
class RateLimiter:
    """A token bucket per client address: ``rate`` requests a second, ``burst`` at once."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def allow(self, client: str) -> bool:
        if self.rate <= 0:
            return True
        now = self.clock()
        with self._lock:
            level, then = self._buckets.get(client, (float(self.burst), now))
            level = min(float(self.burst), level + (now - then) * self.rate)
            if len(self._buckets) > 100_000:  # many addresses: forget the full buckets
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst}
            if level < 1.0:
                self._buckets[client] = (level, now)
                return False
            self._buckets[client] = (level - 1.0, now)
            return True
