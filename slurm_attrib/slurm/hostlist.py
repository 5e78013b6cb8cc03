"""Slurm hostlist expressions: ``node-[01-04,07]`` ↔ node-01 … node-04, node-07.

The grammar Slurm prints (sacct NodeList, scontrol NodeList, ``SLURM_JOB_NODELIST``): comma-separated
items, each a prefix with zero or more bracket groups of numbers and ranges; zero padding follows the
lower bound of a range (``[08-10]`` → 08, 09, 10).
"""

from __future__ import annotations

import itertools
import re

from .errors import SlurmParseError

MAX_HOSTS = 100_000  # a guard against node-[1-999999999]
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_EMPTY = ("", "None assigned", "(null)", "None", "(None)")


def expand(expression: str) -> list[str]:
    """Every host ``expression`` names, in the order written, without duplicates."""
    text = (expression or "").strip()
    if text in _EMPTY:
        return []
    hosts: list[str] = []
    for item in _split_top_level(text):
        hosts.extend(_expand_item(item))
        if len(hosts) > MAX_HOSTS:
            raise SlurmParseError(f"hostlist {expression!r} names more than {MAX_HOSTS} hosts")
    return list(dict.fromkeys(hosts))


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise SlurmParseError(f"hostlist {text!r}: unbalanced ']'")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise SlurmParseError(f"hostlist {text!r}: unbalanced '['")
    items.append(text[start:])
    return [i.strip() for i in items if i.strip()]


def _expand_item(item: str) -> list[str]:
    parts = re.split(r"\[([^\]]*)\]", item)
    literals, groups = parts[0::2], [_expand_group(g, item) for g in parts[1::2]]
    return ["".join(lit + num for lit, num in zip(literals, (*combo, ""))) for combo in itertools.product(*groups)]


def _expand_group(group: str, item: str) -> list[str]:
    numbers: list[str] = []
    for piece in group.split(","):
        m = _RANGE.match(piece.strip())
        if m is None:
            raise SlurmParseError(f"hostlist {item!r}: bad range {piece!r}")
        low, high = m.group(1), m.group(2) or m.group(1)
        if int(high) < int(low) or int(high) - int(low) > MAX_HOSTS:
            raise SlurmParseError(f"hostlist {item!r}: bad range {piece!r}")
        numbers.extend(str(n).zfill(len(low)) for n in range(int(low), int(high) + 1))
    return numbers


def compress(hosts: list[str]) -> str:
    """The shortest-form expression for ``hosts`` (same prefix and padding → one bracket group)."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    for host in dict.fromkeys(hosts):
        m = re.match(r"^(.*?)(\d+)$", host)
        if m is None:
            plain.append(host)
            continue
        groups.setdefault((m.group(1), len(m.group(2))), []).append(int(m.group(2)))
    out = list(plain)
    for (prefix, width), numbers in groups.items():
        ranges = _ranges(sorted(set(numbers)), width)
        out.append(prefix + ranges[0] if len(ranges) == 1 and "-" not in ranges[0]
                   else f"{prefix}[{','.join(ranges)}]")
    return ",".join(out)


def _ranges(numbers: list[int], width: int) -> list[str]:
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
        if n is not None:
            start = prev = n
    return out
