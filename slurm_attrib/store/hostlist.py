"""Slurm hostlist expressions: ``node-[01-04,07]`` → node-01 … node-04, node-07.

Written here rather than taken from PyPI: ``python-hostlist`` is GPL-licensed and the project is
Apache-2.0, and the grammar Slurm prints in ``sacct`` NodeList is small: comma-separated names, each
with zero or more bracket groups of numbers and ranges; zero padding follows the lower bound.
"""

from __future__ import annotations

import itertools
import re

from ..errors import ConfigError

MAX_HOSTS = 100_000  # a guard against a typo such as node-[1-999999999]
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(expression: str) -> list[str]:
    """Every host an expression names, in the order written; ``None``/``(null)``/empty give none."""
    text = expression.strip()
    if text in ("", "None assigned", "(null)", "None"):
        return []
    hosts: list[str] = []
    for item in _split_top_level(text):
        hosts.extend(_expand_item(item))
        if len(hosts) > MAX_HOSTS:
            raise ConfigError(f"hostlist {expression!r} names more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ConfigError(f"hostlist {text!r}: unbalanced ']'")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ConfigError(f"hostlist {text!r}: unbalanced '['")
    items.append(text[start:])
    return [i.strip() for i in items if i.strip()]


def _expand_item(item: str) -> list[str]:
    parts = re.split(r"\[([^\]]*)\]", item)
    literals, groups = parts[0::2], [_expand_group(g, item) for g in parts[1::2]]
    out = []
    for combo in itertools.product(*groups):
        out.append("".join(lit + num for lit, num in zip(literals, (*combo, ""))))
    return out


def _expand_group(group: str, item: str) -> list[str]:
    numbers: list[str] = []
    for piece in group.split(","):
        m = _RANGE.match(piece.strip())
        if m is None:
            raise ConfigError(f"hostlist {item!r}: bad range {piece!r}")
        low, high = m.group(1), m.group(2) or m.group(1)
        if int(high) < int(low) or int(high) - int(low) > MAX_HOSTS:
            raise ConfigError(f"hostlist {item!r}: bad range {piece!r}")
        numbers.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
    return numbers
