"""Slurm hostlist expressions: ``node-[01-04,07]`` ↔ node-01 … node-04, node-07.

The grammar Slurm prints (sacct NodeList, scontrol NodeList, ``SLURM_JOB_NODELIST``): comma-separated
items, each a name with zero or more bracket groups of numbers and ranges; zero padding follows the
bounds of a range (``[08-10]`` → 08, 09, 10). Expansion is ClusterShell's ``NodeSet``
(https://clustershell.readthedocs.io/en/latest/api/NodeSet.html, what Slurm sites already use), after
two checks of our own: the text must be that grammar and nothing more (NodeSet also reads ``@group``,
which can run the site's group commands, and the operators ``!&^``), and the number of hosts it names,
the product of every bracket's size summed over the items, must not pass :data:`MAX_HOSTS` — computed
from the text, before anything is expanded (NodeSet would build all of ``n[0-9999][0-9999]``).

Order: hosts come back sorted as NodeSet sorts them (by name pattern, then numerically), not in the
order written. Slurm prints node lists sorted (``slurm_sort_node_list_str()`` in scontrol, ranged
strings from the database), so for anything Slurm printed the two agree; duplicates are dropped.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import SlurmParseError

MAX_HOSTS = 100_000  # a guard against node-[1-999999999] and n[0-9999][0-9999]
MAX_DIGITS = 18  # a bound in a range: Slurm keeps it in an unsigned long
_EMPTY = ("", "None assigned", "(null)", "None", "(None)")
_PIECE = r"[0-9]+(?:-[0-9]+)?"  # ASCII digits: \d would take any Unicode digit
_ITEM = re.compile(rf"(?:[A-Za-z0-9._-]|\[{_PIECE}(?:,{_PIECE})*\])+")
_GROUP = re.compile(r"\[([^\]]*)\]")


def expand(expression: str) -> list[str]:
    """Every host ``expression`` names, sorted (see the module's note), without duplicates. Anything
    that is not a Slurm hostlist, or names more than :data:`MAX_HOSTS`, is a :class:`SlurmParseError`."""
    text = (expression or "").strip()
    if text in _EMPTY:
        return []
    items = _split_top_level(text)
    count = 0
    for item in items:
        count += _item_size(item, text)
        if count > MAX_HOSTS:
            raise SlurmParseError(f"hostlist {_short(text)} names more than {MAX_HOSTS} hosts")
    return _nodeset(",".join(items), text)


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise SlurmParseError(f"hostlist {_short(text)}: nested '['")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise SlurmParseError(f"hostlist {_short(text)}: unbalanced ']'")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise SlurmParseError(f"hostlist {_short(text)}: unbalanced '['")
    items.append(text[start:])
    return [i.strip() for i in items if i.strip()]


def _item_size(item: str, text: str) -> int:
    """How many hosts one item names: the product of its bracket groups' sizes, from the text alone."""
    if not _ITEM.fullmatch(item):
        raise SlurmParseError(f"hostlist {_short(text)}: {_short(item)} is not a host name or range")
    size = 1
    for group in _GROUP.findall(item):
        size *= sum(_range_size(piece, text) for piece in group.split(","))
        if size > MAX_HOSTS:
            break  # the caller reports it; the product only grows
    return size


def _range_size(piece: str, text: str) -> int:
    low, _, high = piece.partition("-")
    if len(low) > MAX_DIGITS or len(high) > MAX_DIGITS:
        raise SlurmParseError(f"hostlist {_short(text)}: number too long in {piece!r}")
    first, last = int(low), int(high or low)
    if last < first:
        raise SlurmParseError(f"hostlist {_short(text)}: bad range {piece!r}")
    return last - first + 1


def _nodeset(checked: str, text: str) -> list[str]:
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException

    try:
        nodes: Any = NodeSet(checked, resolver=RESOLVER_NOGROUP)
    except NodeSetException as exc:
        raise SlurmParseError(f"hostlist {_short(text)}: {exc}") from None
    return [str(node) for node in nodes]


def _short(text: str) -> str:
    return repr(text if len(text) <= 120 else text[:117] + "...")


def compress(hosts: list[str]) -> str:
    """The shortest-form expression for ``hosts`` (same prefix and padding → one bracket group). Our own
    fold, not NodeSet's: NodeSet folds any numeric axis (``r[1-2]n08``), Slurm's hostlist parser reads
    a trailing number only, and this text goes to ``sacct --nodelist`` and ``sacctmgr nodes=``."""
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
