"""slurm-attrib's assessment policy over NVIDIA's XID catalog, loaded once from the overlay
``slurm_attrib/data/xid_policy.yaml``.

The catalog (:mod:`slurm_attrib.nvidia.catalog`) is NVIDIA's data; the overlay is the project's
judgement of it: the diagnosis category and responsible of each catalog category, the strength of each
severity, the codes that are teardown or context whatever their buckets say, the seriousness order of
the XID 74 bit classes and the plain words of each resolution bucket.  :mod:`slurm_attrib.nvidia.assess`
and :mod:`slurm_attrib.nvidia.decode` read it; a defect raises :class:`slurm_attrib.errors.CatalogError`
with the path of the offending field.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass

from slurm_attrib.errors import CatalogError
from slurm_attrib.nvidia.catalog import CATEGORIES, DATA_PACKAGE, SEVERITIES, packaged_text, vendor_yaml

__all__ = ["POLICY_FILE", "XidPolicy", "load_policy", "parse_policy", "parse_policy_text"]

POLICY_FILE = "xid_policy.yaml"
_RESPONSIBLE = ("infrastructure", "workload", "unknown")


@dataclass(frozen=True)
class XidPolicy:
    """The overlay, validated."""

    categories: Mapping[str, tuple[str, str]]  # catalog category → (diagnosis category, responsible)
    severity_strength: Mapping[str, int]  # catalog severity → strength of a candidate
    teardown_codes: frozenset[int]
    context_codes: frozenset[int]
    xid74_classes: tuple[str, ...]  # least serious first
    bucket_words: Mapping[str, tuple[str, str] | None]  # bucket → (plain words, bucket shown); None: no action

    def xid74_rank(self, bit_class: str) -> int:
        """How serious an XID 74 bit class is; a class the policy does not rank counts as unlisted."""
        order = self.xid74_classes
        return order.index(bit_class) if bit_class in order else order.index("unlisted")


def _fail(path: str, what: str) -> CatalogError:
    return CatalogError(f"xid policy: {path}: {what}")


def _mapping(value: object, path: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _fail(path, "expected a mapping with string keys")
    return value


def _str(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(path, "expected a non-empty string")
    return value


def _int(value: object, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(path, f"expected an integer {low}-{high}")
    return value


def _required(top: Mapping[str, object], key: str) -> object:
    if key not in top:
        raise _fail(key, "missing")
    return top[key]


def _covering(table: Mapping[str, object], path: str, wanted: frozenset[str]) -> Mapping[str, object]:
    """A table keyed by catalog values must list every one of them and nothing else."""
    if set(table) != wanted:
        raise _fail(path, f"must list exactly {', '.join(sorted(wanted))}")
    return table


def _category(value: object, path: str) -> tuple[str, str]:
    record = _mapping(value, path)
    if sorted(record) != ["category", "responsible"]:
        raise _fail(path, "expected {category, responsible}")
    responsible = _str(record["responsible"], f"{path}.responsible")
    if responsible not in _RESPONSIBLE:
        raise _fail(f"{path}.responsible", f"one of {', '.join(_RESPONSIBLE)}")
    return _str(record["category"], f"{path}.category"), responsible


def _codes(value: object, path: str) -> frozenset[int]:
    if not isinstance(value, list):
        raise _fail(path, "expected a list of XID codes")
    return frozenset(_int(code, f"{path}[{i}]", 0, 999) for i, code in enumerate(value))


def _classes(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _fail(path, "expected a list of classes, least serious first")
    classes = tuple(_str(c, f"{path}[{i}]") for i, c in enumerate(value))
    if len(set(classes)) != len(classes) or not {"none", "unlisted"} <= set(classes):
        raise _fail(path, "classes must be distinct and include none and unlisted")
    return classes


def _words(value: object, path: str) -> tuple[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise _fail(path, "expected [plain words, bucket shown] or null")
    return _str(value[0], f"{path}[0]"), _str(value[1], f"{path}[1]")


def parse_policy(data: object) -> XidPolicy:
    """Validate the loaded overlay and build an :class:`XidPolicy` (raises CatalogError)."""
    top = _mapping(data, "<top>")
    categories = _covering(_mapping(_required(top, "categories"), "categories"), "categories", CATEGORIES)
    strengths = _mapping(_required(top, "severity_strength"), "severity_strength")
    words = _mapping(_required(top, "bucket_words"), "bucket_words")
    return XidPolicy(
        categories=types.MappingProxyType({k: _category(v, f"categories.{k}") for k, v in categories.items()}),
        severity_strength=types.MappingProxyType({
            k: _int(v, f"severity_strength.{k}", 0, 100)
            for k, v in _covering(strengths, "severity_strength", SEVERITIES).items()}),
        teardown_codes=_codes(_required(top, "teardown_codes"), "teardown_codes"),
        context_codes=_codes(_required(top, "context_codes"), "context_codes"),
        xid74_classes=_classes(_required(top, "xid74_classes"), "xid74_classes"),
        bucket_words=types.MappingProxyType({k: _words(v, f"bucket_words.{k}") for k, v in words.items()}),
    )


def parse_policy_text(text: str, origin: str = POLICY_FILE) -> XidPolicy:
    """Parse overlay YAML text (raises CatalogError for YAML syntax errors and malformed content)."""
    return parse_policy(vendor_yaml(text, "xid policy", origin))


@functools.cache
def load_policy() -> XidPolicy:
    """The packaged overlay, read once per process (raises CatalogError if missing or malformed)."""
    return parse_policy_text(packaged_text(POLICY_FILE, "xid policy"), f"{DATA_PACKAGE}/{POLICY_FILE}")
