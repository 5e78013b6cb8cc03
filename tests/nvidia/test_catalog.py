"""Tests for the packaged XID catalog and its loader (slurm_attrib.nvidia.catalog)."""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from slurm_attrib.diskcache import CACHE_ENV
from slurm_attrib.errors import AttribError, CatalogError
from slurm_attrib.nvidia import catalog as catalog_module
from slurm_attrib.nvidia.catalog import (
    BitMask,
    Catalog,
    get_xid,
    load_catalog,
    parse_catalog,
    parse_catalog_text,
)


def _data_text() -> str:
    return (
        importlib.resources.files("slurm_attrib.data")
        .joinpath("xid_catalog.yaml")
        .read_text(encoding="utf-8")
    )


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _minimal() -> dict[str, Any]:
    return {
        "source": ["https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"],
        "retrieved": "2026-07",
        "built": "2026-12-02",
        "schema_version": 1,
        "xids": [
            {
                "code": 79,
                "name": "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
                "nvidia_description_short": "GPU has fallen off the bus",
                "description": "lost on PCIe",
                "category": "hardware",
                "severity": "critical",
                "immediate_action": "RESTART_BM",
                "investigatory_action": "CONTACT_SUPPORT",
                "applies_to": {"A100": True},
                "xid154_linkage": None,
                "legacy_causes": ["hw"],
                "gcm_noncritical": False,
                "source_urls": [],
            }
        ],
        "nvlink5_decode_rules": [
            {
                "xid": 149,
                "subcode": "NETIR/NETIR_INT",
                "intrinfo_mask_v1": "------000000----------0000000110",
                "intrinfo_mask_v2": "------000000-------------0011000",
                "error_status": [],
                "action": "RESET_GPU",
                "investigatory": "SYMPATHETIC_REPORT_SOLO",
                "severity": "Link Fatal",
                "hw_sw": "HW/SW",
                "local_remote_impact": "x",
            }
        ],
        "xid74_register_bits": [
            {"register": 1, "bits": [0], "class": "ignore", "guidance": "safe to ignore"}
        ],
        "xid154_actions": [{"text": "None", "meaning": "no action needed"}],
        "nvml_gpu_recovery_action": {0: "GPU_RECOVERY_ACTION_NONE"},
    }


# --------------------------------------------------------------------------------------------------
# the packaged data file


def test_data_file_states_source_and_dates(catalog: Catalog) -> None:
    assert any(url.startswith("https://docs.nvidia.com/deploy/xid-errors/") for url in catalog.source)
    assert catalog.retrieved == "2026-07"
    assert catalog.built == "2026-12-02"
    assert catalog.schema_version == 1


def test_data_file_keeps_provenance_header_and_size() -> None:
    text = _data_text()
    assert text.startswith("# XID catalog (machine-readable).")
    assert "7f70ce9684be0c9d98a367770341ccc1d8bca4465cebe42dab7e23d57df5d5a5" in text
    assert len(text.encode("utf-8")) < 200_000
    top = yaml.safe_load(text)
    for key in ("source", "retrieved", "built", "xids", "nvlink5_decode_rules", "xid74_register_bits"):
        assert key in top
    assert list(top)[:3] == ["source", "retrieved", "built"]


def test_load_catalog_is_cached(catalog: Catalog) -> None:
    assert load_catalog() is catalog


def test_every_code_1_to_172(catalog: Catalog) -> None:
    assert sorted(catalog.xids) == list(range(1, 173))


@pytest.mark.parametrize(
    ("code", "name", "category", "severity", "immediate", "investigatory"),
    [
        (
            13,
            "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
            "application",
            "medium",
            "RESTART_APP",
            "WORKFLOW_XID_13",
        ),
        (
            31,
            "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
            "application",
            "medium",
            "RESTART_APP",
            "WORKFLOW_XID_31",
        ),
        (43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "application", "low", "IGNORE", "CONTACT_SUPPORT"),
        (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "memory", "high", "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "memory", "low", "IGNORE", "IGNORE"),
        (74, "NVLINK_ERROR", "nvlink", "payload_dependent", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
        (
            79,
            "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
            "hardware",
            "critical",
            "RESTART_BM",
            "CONTACT_SUPPORT",
        ),
        (94, "ROBUST_CHANNEL_CONTAINED_ERROR", "memory", "medium", "RESTART_APP", "IGNORE (sympathetic)"),
        (95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "memory", "high", "RESET_GPU", "IGNORE (sympathetic)"),
        (119, "GSP_RPC_TIMEOUT", "driver", "high", "RESET_GPU", "INVESTIGATE_SW"),
        (
            149,
            "NVLINK_NETIR_ERROR",
            "nvlink",
            "payload_dependent",
            "WORKFLOW_NVLINK5_ERR",
            "WORKFLOW_NVLINK5_ERR",
        ),
        (
            154,
            "GPU_RECOVERY_ACTION_CHANGED",
            "driver",
            "payload_dependent",
            "XID_154",
            "N/A Informational only regarding another Xid",
        ),
        (162, "PSHC_REENGAGED", "thermal_power", "unknown", None, None),
    ],
)
def test_lookup_by_code(
    catalog: Catalog,
    code: int,
    name: str,
    category: str,
    severity: str,
    immediate: str | None,
    investigatory: str | None,
) -> None:
    entry = catalog.get(code)
    assert entry is not None
    assert entry is get_xid(code)
    assert code in catalog
    assert (entry.code, entry.name, entry.category, entry.severity) == (code, name, category, severity)
    assert (entry.immediate_action, entry.investigatory_action) == (immediate, investigatory)


def test_entry_details(catalog: Catalog) -> None:
    entry = catalog.get(79)
    assert entry is not None
    assert entry.applies_to["H100"] is True
    assert entry.dcgm_health is not None and "FALLEN_OFF_BUS" in entry.dcgm_health
    assert entry.source_urls
    assert entry.xid154_linkage is not None and "R565" in entry.xid154_linkage
    with pytest.raises(TypeError):
        entry.applies_to["H100"] = False  # type: ignore[index]


@pytest.mark.parametrize("code", [0, 173, 999, -1])
def test_lookup_unknown_code(catalog: Catalog, code: int) -> None:
    assert catalog.get(code) is None
    assert get_xid(code) is None
    assert code not in catalog


def test_nvlink5_rules(catalog: Catalog) -> None:
    assert len(catalog.nvlink5_rules) == 95
    assert {rule.xid for rule in catalog.nvlink5_rules} == set(range(144, 151))
    for rule in catalog.nvlink5_rules:
        assert len(rule.mask_v1.text) == 32 and len(rule.mask_v2.text) == 32
    netir = catalog.nvlink5_rules_for(149)
    assert all(rule.xid == 149 for rule in netir)
    link_down = [rule for rule in netir if "NETIR_LINK_DOWN" in rule.subcode]
    reasons = sorted((rule.mask_v1.value >> 20) & 0x3F for rule in link_down)
    assert reasons == [0, 1, 2, 4, 10, 15, 16, 17, 18, 21, 22, 32, 33, 34, 35, 36, 37, 38, 40, 42, 43]
    assert all(rule.error_status == () for rule in link_down)
    promoted = [rule for rule in catalog.nvlink5_rules if rule.action2 is not None]
    assert len(promoted) == 3
    assert all(rule.action2 == "RESET_GPU" and rule.action2_mask_v1 is not None for rule in promoted)
    mse = [rule for rule in catalog.nvlink5_rules_for(150) if rule.subcode == "MSE Degraded"]
    assert mse[0].error_status == (0, 0xFFFFFFFF)


def test_nvlink5_rule_names_by_branch(catalog: Catalog) -> None:
    rule = next(r for r in catalog.nvlink5_rules if r.subcode == "NETIR_LINK_EVT/NETIR_LINK_DOWN")
    assert rule.name_for("v1") == "NETIR_LINK_EVT"
    assert rule.name_for("v2") == "NETIR_LINK_DOWN"
    saw = catalog.nvlink5_rules_for(144)[0]
    assert saw.name_for("v1") == saw.name_for("v2") == "SAW_MVB"


@pytest.mark.parametrize(
    ("register", "bit", "bit_class"),
    [
        (1, 0, "ignore"),
        (1, 20, "sympathetic"),
        (1, 21, "marginal_signal_integrity"),
        (3, 16, "report_if_repeated"),
        (4, 18, "sympathetic_fabric_reset"),
        (5, 20, "ecc_threshold_no_uncorrectable"),
    ],
)
def test_xid74_bit_rules(catalog: Catalog, register: int, bit: int, bit_class: str) -> None:
    rule = catalog.xid74_rule(register, bit)
    assert rule is not None and rule.bit_class == bit_class


@pytest.mark.parametrize(("register", "bit"), [(1, 2), (2, 0), (3, 31), (7, 5)])
def test_xid74_unlisted_bits(catalog: Catalog, register: int, bit: int) -> None:
    assert catalog.xid74_rule(register, bit) is None


def test_xid154_and_nvml(catalog: Catalog) -> None:
    assert [a.text for a in catalog.xid154_actions] == [
        "None",
        "Drain P2P",
        "Drain and Reset",
        "GPU Reset Required",
        "Node Reboot Required",
    ]
    assert catalog.xid154_meaning("node reboot required") == "reboot the node"
    assert catalog.xid154_meaning("PF FLR") is None
    assert dict(catalog.nvml_recovery_actions)[2] == "GPU_RECOVERY_ACTION_NODE_REBOOT"
    assert sorted(catalog.nvml_recovery_actions) == list(range(8))


# --------------------------------------------------------------------------------------------------
# BitMask


@pytest.mark.parametrize(
    ("mask", "word", "expected"),
    [
        ("------000000----------0111000110", 0x025001C6, False),  # reason 37 is not 0
        ("------100101----------0111000110", 0x025001C6, True),
        ("------000000-------------0000111", 0x04082907, True),
        ("0111000110", 0x1C6, True),  # padded on the MSB side with don't-care bits
        ("0111000110", 0xFFFFF1C6, True),
        ("1", 0x0, False),
    ],
)
def test_bitmask(mask: str, word: int, expected: bool) -> None:
    parsed = BitMask.parse(mask)
    assert len(parsed.text) == 32
    assert parsed.matches(word) is expected


@pytest.mark.parametrize("mask", ["", "012", "x" * 32, "0" * 33])
def test_bitmask_rejects(mask: str) -> None:
    with pytest.raises(ValueError):
        BitMask.parse(mask)


# --------------------------------------------------------------------------------------------------
# malformed catalogs


def test_minimal_catalog_parses() -> None:
    cat = parse_catalog(_minimal())
    assert cat.get(79) is not None
    assert cat.source == ("https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",)


def test_unquoted_dates_and_single_source_are_accepted() -> None:
    text = yaml.safe_dump(_minimal()).replace("built: '2026-12-02'", "built: 2026-12-02")
    assert "built: 2026-12-02" in text
    cat = parse_catalog_text(text)
    assert cat.built == "2026-12-02"
    doc = _minimal()
    doc["source"] = "https://docs.nvidia.com/deploy/xid-errors/index.html"
    assert parse_catalog(doc).source == ("https://docs.nvidia.com/deploy/xid-errors/index.html",)


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        del doc[key]

    return mutate


def _set_xid(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc["xids"][0][key] = value

    return mutate


def _set_rule(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        doc["nvlink5_decode_rules"][0][key] = value

    return mutate


def _duplicate_xid(doc: dict[str, Any]) -> None:
    doc["xids"].append(copy.deepcopy(doc["xids"][0]))


def _bad_bit(doc: dict[str, Any]) -> None:
    doc["xid74_register_bits"][0]["bits"] = [32]


def _bad_register(doc: dict[str, Any]) -> None:
    doc["xid74_register_bits"][0]["register"] = 8


def _bad_nvml_key(doc: dict[str, Any]) -> None:
    doc["nvml_gpu_recovery_action"] = {"zero": "NONE"}


def _xids_not_list(doc: dict[str, Any]) -> None:
    doc["xids"] = {"79": {}}


@pytest.mark.parametrize(
    "mutate",
    [
        _drop("source"),
        _drop("retrieved"),
        _drop("built"),
        _drop("xids"),
        _drop("nvlink5_decode_rules"),
        _drop("xid74_register_bits"),
        _drop("xid154_actions"),
        _drop("nvml_gpu_recovery_action"),
        _xids_not_list,
        _set_xid("code", "79"),
        _set_xid("code", True),
        _set_xid("category", "cosmic_rays"),
        _set_xid("severity", "apocalyptic"),
        _set_xid("name", None),
        _set_xid("immediate_action", 5),
        _set_xid("applies_to", {"A100": "yes"}),
        _duplicate_xid,
        _set_rule("xid", 79),
        _set_rule("intrinfo_mask_v1", "0101x"),
        _set_rule("error_status", ["zz"]),
        _set_rule("error_status", ["0x1FFFFFFFF"]),
        _set_rule("action2", "RESET_GPU"),
        _bad_bit,
        _bad_register,
        _bad_nvml_key,
    ],
)
def test_malformed_catalog_raises(mutate: Callable[[dict[str, Any]], None]) -> None:
    doc = _minimal()
    mutate(doc)
    with pytest.raises(CatalogError, match="xid catalog"):
        parse_catalog(doc)


@pytest.mark.parametrize("text", ["[1, 2", "- just\n- a list\n", "", "key: [unclosed"])
def test_malformed_text_raises(text: str) -> None:
    with pytest.raises(CatalogError) as info:
        parse_catalog_text(text)
    assert isinstance(info.value, AttribError)


def test_the_cached_catalog_is_the_parsed_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The packaged catalog's parsed YAML is kept in the cache: a second process start reads it back instead of
    parsing, and builds the same entries (numbered keys and all)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    parses: list[str] = []
    real = catalog_module.vendor_yaml
    monkeypatch.setattr(catalog_module, "vendor_yaml", lambda *args: parses.append(args[1]) or real(*args))
    fresh = catalog_module.parse_catalog_text(catalog_module.packaged_text(catalog_module.DATA_FILE, "x"))
    parses.clear()
    loaded = []
    for _ in range(2):
        catalog_module.load_catalog.cache_clear()
        loaded.append(catalog_module.load_catalog())
    catalog_module.load_catalog.cache_clear()
    assert parses == ["xid catalog"] and list(tmp_path.glob("*.xid.json"))
    for field in dataclasses.fields(fresh):
        assert getattr(loaded[1], field.name) == getattr(fresh, field.name), field.name


def test_a_cached_catalog_that_does_not_build_gives_way_to_the_file(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    catalog_module.load_catalog.cache_clear()
    expected = catalog_module.load_catalog()
    (entry,) = tmp_path.glob("*.xid.json")
    entry.write_bytes(b'{"xids": "not a table"}')
    catalog_module.load_catalog.cache_clear()
    try:
        assert catalog_module.load_catalog().xids == expected.xids
    finally:
        catalog_module.load_catalog.cache_clear()
