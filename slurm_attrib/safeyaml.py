"""YAML from files someone else wrote (node bundles, job bundles): bounded before it is built.

PyYAML's safe loader still builds whatever the text describes: 5,000 nested lists exhaust the
recursion limit, and nine anchors each aliased nine times by the next (a "billion laughs") describe
10**9 values in a few hundred bytes, which anything that walks the result then pays for. So the event
stream is read first, flat and linear: a document nested deeper than ``max_depth``, or one that would
hold more than ``max_nodes`` values with its aliases expanded, is refused with :class:`YAMLBoundError`
(a ``yaml.YAMLError``, so callers that already handle bad YAML handle it too).
"""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 64
MAX_NODES = 1_000_000
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class YAMLBoundError(yaml.YAMLError):
    """The document is nested too deep or expands to too many values."""


def check_bounds(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES,
                 loader: type = SAFE_LOADER) -> None:
    """Raise :class:`YAMLBoundError` when ``text`` is too deep or expands too far; YAMLError when it
    does not parse. An alias counts as the size of what its anchor holds."""
    depth = total = 0
    opened: list[tuple[Any, int]] = []  # (anchor, values counted before it) per open collection
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > max_depth:
                raise YAMLBoundError(f"nested deeper than {max_depth} levels")
            opened.append((event.anchor, total))
            total += 1
        elif isinstance(event, _CLOSE):
            depth -= 1
            anchor, before = opened.pop()
            if anchor is not None:
                sizes[anchor] = total - before
        elif isinstance(event, yaml.ScalarEvent):
            total += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            total += sizes.get(event.anchor or "", 1)
        if total > max_nodes:
            raise YAMLBoundError(f"more than {max_nodes} values once its aliases are expanded")


def loader_version(loader: type = SAFE_LOADER) -> str:
    """What parses with ``loader``: PyYAML's version, the loader's class and, for libyaml's, libyaml's version (the
    key of a cached parse, :mod:`.diskcache`)."""
    libyaml = getattr(getattr(yaml, "_yaml", None), "get_version_string", None)
    return f"PyYAML {yaml.__version__}, {loader.__name__}, libyaml {libyaml() if callable(libyaml) else 'absent'}"


def load(text: str, loader: type = SAFE_LOADER, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """``yaml.load(text, loader)`` once :func:`check_bounds` passed; ``loader`` must be a safe loader."""
    check_bounds(text, max_depth, max_nodes, loader)
    return yaml.load(text, Loader=loader)  # a SafeLoader (sub)class
