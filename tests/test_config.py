"""Configuration: main file, sorted drop-ins, env override, unknown keys are errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_attrib.config import Config, load_config
from slurm_attrib.errors import ConfigError

ETC = Path(__file__).resolve().parents[1] / "etc" / "slurm-attrib.yaml"


def test_defaults_without_a_file(tmp_path: Path) -> None:
    assert load_config(str(tmp_path / "absent.yaml")) == Config()


def test_drop_ins_merge_in_sorted_order(tmp_path: Path) -> None:
    main = tmp_path / "slurm-attrib.yaml"
    main.write_text("cluster: alpha\nfinalizer: {node_bundle_deadline_s: 30, sacct_retries: 2}\n")
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "20-late.yaml").write_text("finalizer: {sacct_retries: 9}\n")
    (tmp_path / "conf.d" / "10-early.yaml").write_text("finalizer: {sacct_retries: 4}\nremediation: {drain: true}\n")
    config = load_config(str(main))
    assert config.cluster == "alpha"
    assert config.finalizer.node_bundle_deadline_s == 30.0 and config.finalizer.sacct_retries == 9
    assert config.remediation.drain is True
    assert [Path(s).name for s in config.sources] == ["slurm-attrib.yaml", "10-early.yaml", "20-late.yaml"]


def test_env_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("engine: {skew_s: 5}\n")
    monkeypatch.setenv("SLURM_ATTRIB_CONFIG", str(path))
    assert load_config().engine.skew_s == 5.0


@pytest.mark.parametrize("text, message", [
    ("finalizer: {deadline: 3}\n", "unknown key"),
    ("remediation: {drain: 'yes'}\n", "expected true or false"),
    ("collector: {budget_s: fast}\n", "expected a number"),
    ("[1, 2]\n", "expected a mapping"),
    ("cluster: [unclosed\n", "invalid YAML"),
])
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(path))


def test_the_shipped_example_documents_and_loads_every_key() -> None:
    if not ETC.exists():
        pytest.skip("etc/slurm-attrib.yaml not written yet")
    config = load_config(str(ETC))
    text = ETC.read_text()
    for section in ("engine", "spool", "collector", "finalizer", "remediation", "store", "service", "loki",
                    "prometheus", "kubernetes", "watch"):
        for name in getattr(config, section).__dataclass_fields__:
            assert f"{name}:" in text, f"{section}.{name} is not documented in etc/slurm-attrib.yaml"
