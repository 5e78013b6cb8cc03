"""Bounded YAML: too deep or too many values once aliases are expanded is refused before it is built."""

from __future__ import annotations

import pytest
import yaml

from slurm_attrib import safeyaml


def test_plain_documents_and_shared_anchors_load() -> None:
    shared = [1, 2]
    assert safeyaml.load(yaml.safe_dump({"a": shared, "b": shared})) == {"a": [1, 2], "b": [1, 2]}
    assert safeyaml.load("x: 1\n") == {"x": 1}


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(safeyaml.YAMLBoundError, match="deeper than 64"):
        safeyaml.load("[" * 65 + "]" * 65, loader=yaml.SafeLoader)
    assert safeyaml.load("[" * 64 + "]" * 64, loader=yaml.SafeLoader) is not None


def test_an_alias_bomb_is_refused_before_it_is_built() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9))
    with pytest.raises(safeyaml.YAMLBoundError, match="aliases"):
        safeyaml.load(bomb)
    with pytest.raises(yaml.YAMLError):  # callers that handle bad YAML handle it too
        safeyaml.load(bomb)


def test_the_count_includes_what_aliases_repeat() -> None:
    text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
    safeyaml.check_bounds(text, max_nodes=20)
    with pytest.raises(safeyaml.YAMLBoundError):
        safeyaml.check_bounds(text, max_nodes=12)
