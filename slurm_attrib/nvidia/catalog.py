"""The NVIDIA XID catalog shipped with slurm-attrib, loaded once and exposed as typed, read-only records.

The data file is ``slurm_attrib/data/xid_catalog.yaml`` (built from NVIDIA's Xid catalog workbook, the
legacy cause table, DCGM and NVML; its header and the ``source`` / ``retrieved`` / ``built`` keys state
where it comes from).  It holds:

* ``xids`` -- one entry per XID code (mnemonic, NVIDIA resolution buckets, project category/severity);
* ``nvlink5_decode_rules`` -- the XID 144-150 IntrInfo/ErrorStatus decode table (masks MSB first,
  ``-`` = don't care, ``v1`` for drivers < R575 and ``v2`` for >= R575);
* ``xid74_register_bits`` -- the XID 74 register/bit guidance (bits counted from the LSB);
* ``xid154_actions`` and ``nvml_gpu_recovery_action`` -- XID 154 action texts and the NVML enum.

:func:`load_catalog` reads the packaged file through :mod:`importlib.resources` once and caches it;
:func:`parse_catalog` / :func:`parse_catalog_text` validate any other mapping or text.  Every defect in
the data raises :class:`slurm_attrib.errors.CatalogError` with the path of the offending field.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import importlib.resources
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import yaml

from slurm_attrib import diskcache
from slurm_attrib.errors import CatalogError
from slurm_attrib.safeyaml import loader_version

try:  # the C loader is ~10x faster on this 180 KB file; same safe semantics
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

__all__ = [
    "BitMask",
    "Catalog",
    "Nvlink5Rule",
    "Xid74BitRule",
    "Xid154Action",
    "XidEntry",
    "get_xid",
    "load_catalog",
    "parse_catalog",
    "parse_catalog_text",
]

DATA_PACKAGE = "slurm_attrib.data"
DATA_FILE = "xid_catalog.yaml"

#: Project categories used in the data file (``category`` of each XID entry).
CATEGORIES = frozenset({"memory", "nvlink", "hardware", "thermal_power", "driver", "application", "unknown"})
#: Project severities used in the data file (``severity`` of each XID entry).
SEVERITIES = frozenset({"critical", "high", "medium", "low", "unknown", "payload_dependent"})

_MASK_WIDTH = 32


@dataclass(frozen=True)
class BitMask:
    """A 32-bit pattern written MSB first with ``0``/``1`` for fixed bits and ``-`` for don't-care bits."""

    text: str
    care: int  # 1 where the bit is fixed
    value: int  # the fixed bits' values

    @classmethod
    def parse(cls, text: str) -> BitMask:
        """Parse a mask string; shorter masks are padded on the MSB side with don't-care bits."""
        compact = text.strip().replace(" ", "").replace("_", "")
        if not compact or len(compact) > _MASK_WIDTH or set(compact) - {"0", "1", "-"}:
            raise ValueError(f"not a 32-bit mask of 0/1/-: {text!r}")
        padded = compact.rjust(_MASK_WIDTH, "-")
        care = 0
        value = 0
        for char in padded:
            care <<= 1
            value <<= 1
            if char != "-":
                care |= 1
                value |= int(char)
        return cls(text=padded, care=care, value=value)

    def matches(self, word: int) -> bool:
        """True when every fixed bit of the mask equals the bit of ``word``."""
        return (word & self.care) == self.value


@dataclass(frozen=True)
class XidEntry:
    """One XID code of the catalog."""

    code: int
    name: str
    nvidia_description_short: str
    description: str
    category: str
    severity: str
    immediate_action: str | None
    investigatory_action: str | None
    applies_to: Mapping[str, bool]
    xid154_linkage: str | None
    legacy_causes: tuple[str, ...] | None
    gcm_noncritical: bool
    dcgm_health: str | None
    decode: str | None
    source_urls: tuple[str, ...]


@dataclass(frozen=True)
class Nvlink5Rule:
    """One row of the XID 144-150 decode table."""

    xid: int
    subcode: str  # 'V1name/V2name' when the name changed between branches
    mask_v1: BitMask
    mask_v2: BitMask
    error_status: tuple[int, ...]  # accepted ErrorStatus values; empty = any
    action: str
    investigatory: str
    severity: str
    hw_sw: str
    impact: str
    action2: str | None = None
    action2_mask_v1: BitMask | None = None
    action2_mask_v2: BitMask | None = None

    def mask(self, branch: str) -> BitMask:
        """The IntrInfo mask of ``branch`` ('v1' or 'v2')."""
        return self.mask_v1 if branch == "v1" else self.mask_v2

    def action2_mask(self, branch: str) -> BitMask | None:
        """The mask that promotes this row to ``action2`` in ``branch``, if any."""
        return self.action2_mask_v1 if branch == "v1" else self.action2_mask_v2

    def accepts_status(self, error_status: int) -> bool:
        """True when the row applies to this ErrorStatus value (an empty list means any value)."""
        return not self.error_status or error_status in self.error_status

    def name_for(self, branch: str | None) -> str:
        """The sub-code name used by ``branch`` ('V1name/V2name' → V1name for v1, V2name for v2)."""
        parts = self.subcode.split("/")
        if len(parts) != 2:
            return self.subcode
        return parts[0] if branch == "v1" else parts[1]


@dataclass(frozen=True)
class Xid74BitRule:
    """Guidance for a set of bits of one XID 74 register (registers numbered 1-7, bits from the LSB)."""

    register: int
    bits: tuple[int, ...]
    bit_class: str
    guidance: str


@dataclass(frozen=True)
class Xid154Action:
    """An action text XID 154 prints and what it means."""

    text: str
    meaning: str


@dataclass(frozen=True, eq=False)
class Catalog:
    """The whole catalog; mappings are read-only."""

    source: tuple[str, ...]
    retrieved: str
    built: str
    schema_version: int
    xids: Mapping[int, XidEntry]
    nvlink5_rules: tuple[Nvlink5Rule, ...]
    xid74_bits: tuple[Xid74BitRule, ...]
    xid154_actions: tuple[Xid154Action, ...]
    nvml_recovery_actions: Mapping[int, str]

    def get(self, code: int) -> XidEntry | None:
        """The entry for ``code``, or None when the catalog does not list it."""
        return self.xids.get(code)

    def __contains__(self, code: object) -> bool:
        return code in self.xids

    def nvlink5_rules_for(self, code: int) -> tuple[Nvlink5Rule, ...]:
        """The decode rows of one XID (144-150)."""
        return tuple(rule for rule in self.nvlink5_rules if rule.xid == code)

    def xid74_rule(self, register: int, bit: int) -> Xid74BitRule | None:
        """The guidance row covering ``bit`` of ``register``, or None for an unlisted bit."""
        for rule in self.xid74_bits:
            if rule.register == register and bit in rule.bits:
                return rule
        return None

    def xid154_meaning(self, text: str) -> str | None:
        """The meaning of an XID 154 action text (case-insensitive), or None when it is not listed."""
        wanted = text.strip().lower()
        for action in self.xid154_actions:
            if action.text.lower() == wanted:
                return action.meaning
        return None


# --------------------------------------------------------------------------------------------------
# validation helpers: each takes the raw YAML value and the path used in error messages


def _fail(path: str, what: str) -> CatalogError:
    return CatalogError(f"xid catalog: {path}: {what}")


def _mapping(value: object, path: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise _fail(path, f"key {key!r} is not a string")
    return value


def _list(value: object, path: str) -> Sequence[object]:
    if not isinstance(value, list):
        raise _fail(path, f"expected a list, got {type(value).__name__}")
    return value


def _required(data: Mapping[str, object], key: str, path: str) -> object:
    if key not in data:
        raise _fail(path, f"missing key {key!r}")
    return data[key]


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object, path: str) -> str | None:
    return None if value is None else _str(value, path)


def _int(value: object, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"expected an integer, got {type(value).__name__}")
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, f"expected true/false, got {type(value).__name__}")
    return value


def _str_tuple(value: object, path: str) -> tuple[str, ...]:
    return tuple(_str(item, f"{path}[{i}]") for i, item in enumerate(_list(value, path)))


def _date_text(value: object, path: str) -> str:
    # YAML turns an unquoted 2026-12-02 into a date; accept both spellings.
    if isinstance(value, datetime.date):
        return value.isoformat()
    return _str(value, path)


def _hex_word(value: object, path: str) -> int:
    text = _str(value, path).strip()
    try:
        word = int(text, 16)
    except ValueError:
        raise _fail(path, f"not a hex word: {text!r}") from None
    if not 0 <= word <= 0xFFFFFFFF:
        raise _fail(path, f"out of 32-bit range: {text!r}")
    return word


def _mask(value: object, path: str) -> BitMask:
    try:
        return BitMask.parse(_str(value, path))
    except ValueError as exc:
        raise _fail(path, str(exc)) from None


def _opt_mask(value: object, path: str) -> BitMask | None:
    return None if value is None else _mask(value, path)


def _xid_entry(raw: object, path: str) -> XidEntry:
    data = _mapping(raw, path)
    code = _int(_required(data, "code", path), f"{path}.code")
    category = _str(_required(data, "category", path), f"{path}.category")
    if category not in CATEGORIES:
        raise _fail(f"{path}.category", f"unknown category {category!r}")
    severity = _str(_required(data, "severity", path), f"{path}.severity")
    if severity not in SEVERITIES:
        raise _fail(f"{path}.severity", f"unknown severity {severity!r}")
    applies_raw = _mapping(data.get("applies_to", {}), f"{path}.applies_to")
    applies = {key: _bool(val, f"{path}.applies_to.{key}") for key, val in applies_raw.items()}
    legacy = data.get("legacy_causes")
    return XidEntry(
        code=code,
        name=_str(_required(data, "name", path), f"{path}.name"),
        nvidia_description_short=_str(
            data.get("nvidia_description_short", ""), f"{path}.nvidia_description_short"
        ),
        description=_str(data.get("description", ""), f"{path}.description"),
        category=category,
        severity=severity,
        immediate_action=_opt_str(_required(data, "immediate_action", path), f"{path}.immediate_action"),
        investigatory_action=_opt_str(
            _required(data, "investigatory_action", path), f"{path}.investigatory_action"
        ),
        applies_to=types.MappingProxyType(applies),
        xid154_linkage=_opt_str(data.get("xid154_linkage"), f"{path}.xid154_linkage"),
        legacy_causes=None if legacy is None else _str_tuple(legacy, f"{path}.legacy_causes"),
        gcm_noncritical=_bool(data.get("gcm_noncritical", False), f"{path}.gcm_noncritical"),
        dcgm_health=_opt_str(data.get("dcgm_health"), f"{path}.dcgm_health"),
        decode=_opt_str(data.get("decode"), f"{path}.decode"),
        source_urls=_str_tuple(data.get("source_urls", []), f"{path}.source_urls"),
    )


def _nvlink5_rule(raw: object, path: str) -> Nvlink5Rule:
    data = _mapping(raw, path)
    xid = _int(_required(data, "xid", path), f"{path}.xid")
    if not 144 <= xid <= 150:
        raise _fail(f"{path}.xid", f"NVLink-5 rules cover XIDs 144-150, got {xid}")
    statuses = _list(data.get("error_status", []), f"{path}.error_status")
    action2 = _opt_str(data.get("action2"), f"{path}.action2")
    mask2_v1 = _opt_mask(data.get("action2_mask_v1"), f"{path}.action2_mask_v1")
    mask2_v2 = _opt_mask(data.get("action2_mask_v2"), f"{path}.action2_mask_v2")
    if action2 is not None and (mask2_v1 is None or mask2_v2 is None):
        raise _fail(path, "action2 needs action2_mask_v1 and action2_mask_v2")
    return Nvlink5Rule(
        xid=xid,
        subcode=_str(_required(data, "subcode", path), f"{path}.subcode"),
        mask_v1=_mask(_required(data, "intrinfo_mask_v1", path), f"{path}.intrinfo_mask_v1"),
        mask_v2=_mask(_required(data, "intrinfo_mask_v2", path), f"{path}.intrinfo_mask_v2"),
        error_status=tuple(_hex_word(s, f"{path}.error_status[{i}]") for i, s in enumerate(statuses)),
        action=_str(_required(data, "action", path), f"{path}.action"),
        investigatory=_str(_required(data, "investigatory", path), f"{path}.investigatory"),
        severity=_str(_required(data, "severity", path), f"{path}.severity"),
        hw_sw=_str(data.get("hw_sw", ""), f"{path}.hw_sw"),
        impact=_str(data.get("local_remote_impact", ""), f"{path}.local_remote_impact"),
        action2=action2,
        action2_mask_v1=mask2_v1,
        action2_mask_v2=mask2_v2,
    )


def _xid74_rule(raw: object, path: str) -> Xid74BitRule:
    data = _mapping(raw, path)
    register = _int(_required(data, "register", path), f"{path}.register")
    if not 1 <= register <= 7:
        raise _fail(f"{path}.register", f"registers are numbered 1-7, got {register}")
    bits_raw = _list(_required(data, "bits", path), f"{path}.bits")
    bits = tuple(_int(b, f"{path}.bits[{i}]") for i, b in enumerate(bits_raw))
    if any(not 0 <= b < _MASK_WIDTH for b in bits):
        raise _fail(f"{path}.bits", "bits must be 0-31")
    return Xid74BitRule(
        register=register,
        bits=bits,
        bit_class=_str(_required(data, "class", path), f"{path}.class"),
        guidance=_str(_required(data, "guidance", path), f"{path}.guidance"),
    )


def _xid154_action(raw: object, path: str) -> Xid154Action:
    data = _mapping(raw, path)
    return Xid154Action(
        text=_str(_required(data, "text", path), f"{path}.text"),
        meaning=_str(_required(data, "meaning", path), f"{path}.meaning"),
    )


def _section(top: Mapping[str, object], key: str) -> Sequence[object]:
    return _list(_required(top, key, "<top>"), key)


def parse_catalog(data: object) -> Catalog:
    """Validate the loaded YAML document and build a :class:`Catalog` (raises CatalogError)."""
    top = _mapping(data, "<top>")
    source_raw = _required(top, "source", "<top>")
    if isinstance(source_raw, str):
        source: tuple[str, ...] = (source_raw,)
    else:
        source = _str_tuple(source_raw, "source")

    xids: dict[int, XidEntry] = {}
    for i, raw in enumerate(_section(top, "xids")):
        entry = _xid_entry(raw, f"xids[{i}]")
        if entry.code in xids:
            raise _fail(f"xids[{i}].code", f"duplicate XID {entry.code}")
        xids[entry.code] = entry

    rules = tuple(
        _nvlink5_rule(raw, f"nvlink5_decode_rules[{i}]")
        for i, raw in enumerate(_section(top, "nvlink5_decode_rules"))
    )
    bits = tuple(
        _xid74_rule(raw, f"xid74_register_bits[{i}]")
        for i, raw in enumerate(_section(top, "xid74_register_bits"))
    )
    actions = tuple(
        _xid154_action(raw, f"xid154_actions[{i}]") for i, raw in enumerate(_section(top, "xid154_actions"))
    )
    nvml_raw = _required(top, "nvml_gpu_recovery_action", "<top>")
    if not isinstance(nvml_raw, Mapping):
        raise _fail("nvml_gpu_recovery_action", "expected a mapping")
    nvml = {
        _int(key, f"nvml_gpu_recovery_action key {key!r}"): _str(val, f"nvml_gpu_recovery_action.{key}")
        for key, val in nvml_raw.items()
    }
    return Catalog(
        source=source,
        retrieved=_date_text(_required(top, "retrieved", "<top>"), "retrieved"),
        built=_date_text(_required(top, "built", "<top>"), "built"),
        schema_version=_int(top.get("schema_version", 1), "schema_version"),
        xids=types.MappingProxyType(xids),
        nvlink5_rules=rules,
        xid74_bits=bits,
        xid154_actions=actions,
        nvml_recovery_actions=types.MappingProxyType(nvml),
    )


def vendor_yaml(text: str, what: str, origin: str) -> object:
    """Parse the YAML of a vendor data file (the catalog, the policy overlay); CatalogError names it."""
    try:
        return yaml.load(text, Loader=_SafeLoader)  # a safe loader (C or pure Python)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{what}: {origin}: invalid YAML: {exc}") from None


def packaged_text(name: str, what: str) -> str:
    """The text of a data file shipped in ``slurm_attrib.data``; CatalogError when it cannot be read."""
    try:
        return importlib.resources.files(DATA_PACKAGE).joinpath(name).read_text(encoding="utf-8")
    except (OSError, ModuleNotFoundError) as exc:
        raise CatalogError(f"{what}: cannot read {DATA_PACKAGE}/{name}: {exc}") from None


def parse_catalog_text(text: str, origin: str = DATA_FILE) -> Catalog:
    """Parse catalog YAML text (raises CatalogError for YAML syntax errors and malformed content)."""
    return parse_catalog(vendor_yaml(text, "xid catalog", origin))


@functools.cache
def load_catalog() -> Catalog:
    """The packaged catalog, read once per process (raises CatalogError if missing or malformed). Its parsed
    YAML is kept in the cache between runs (:func:`.diskcache.cached_document`, named by the file's content and
    the YAML loader's versions): parsing it cost ~35 ms of every diagnosis that decodes an Xid, reading it back
    5 ms. A cached parse that does not build is set aside for the file's own."""
    text = packaged_text(DATA_FILE, "xid catalog")
    origin = f"{DATA_PACKAGE}/{DATA_FILE}"
    shape = repr(("xid-catalog/1", loader_version(_SafeLoader), hashlib.sha256(text.encode()).hexdigest()))
    document = diskcache.cached_document(shape, ".xid.json", lambda: vendor_yaml(text, "xid catalog", origin),
                                         lambda parsed: isinstance(parsed, dict))
    try:
        return parse_catalog(document)
    except CatalogError:
        return parse_catalog_text(text, origin)


def get_xid(code: int) -> XidEntry | None:
    """The packaged catalog's entry for ``code``, or None when it is not listed."""
    return load_catalog().get(code)
