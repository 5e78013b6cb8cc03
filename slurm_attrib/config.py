"""Configuration: one main YAML file plus ``conf.d/*.yaml`` drop-ins read in sorted order.

The main file is ``/etc/slurm-attrib/slurm-attrib.yaml``; ``$SLURM_ATTRIB_CONFIG`` overrides the
path. Drop-ins merge over it key by key (mappings merge, other values replace). Every key is
documented in ``etc/slurm-attrib.yaml``. Unknown keys are an error naming the file, so a typo never
silently falls back to a default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, TypeVar

import yaml

from .errors import ConfigError
from .settings import EngineSettings

DEFAULT_PATH = "/etc/slurm-attrib/slurm-attrib.yaml"
ENV_PATH = "SLURM_ATTRIB_CONFIG"


@dataclass(frozen=True)
class SpoolConfig:
    """Where node bundles and queued jobs wait for the finalizer."""

    dir: str = "/var/spool/slurm-attrib"
    http_url: str = ""  # POST node bundles here instead of (or before) the shared directory
    http_timeout_s: float = 3.0
    http_token_file: str = ""  # a root-only file whose first line is the bearer token sent with that POST
    fallback_dir: str = "/var/tmp/slurm-attrib-spool"  # node-local spool used when `dir` is not writable


@dataclass(frozen=True)
class CollectorConfig:
    """The node epilog's collector."""

    budget_s: float = 10.0  # the whole collector, enforced by the wrapper's `timeout -k`
    capture_always: bool = False  # also collect for jobs that ended 0:0 with derived 0:0
    source_timeout_s: float = 3.0  # each tool (journalctl, nvidia-smi, dcgmi) on its own
    max_bundle_bytes: int = 8 << 20  # size cap of one node bundle
    window_before_s: float = 300.0  # kernel log taken from this long before the job start
    window_after_s: float = 60.0  # ... to this long after its end
    log_file: str = "/var/log/slurm-attrib/epilog.log"
    budget_margin_s: float = 1.5  # stop starting sources this long before budget_s, to write the bundle
    unknown_start_window_s: float = 3600.0  # window length before the end when the Epilog has no start time
    interpreter: str = "/usr/libexec/slurm-attrib/python"  # the Python the wrapper runs the collector with
    journald: bool = True  # try `journalctl -k` before the syslog files
    kernel_log_files: tuple[str, ...] = ("/var/log/kern.log", "/var/log/messages", "/var/log/syslog")
    kernel_log_path: str = ""  # one file instead of journald + kernel_log_files; "{node}" = node name
    nvidia_smi: str = "nvidia-smi"  # command for the `-q -x` snapshot; "" disables it
    dcgmi: str = "dcgmi"  # command for `health -c` / `discovery -l`; "" disables it
    dcgm_exporter_url: str = ""  # e.g. http://127.0.0.1:9400/metrics; "" disables the scrape


@dataclass(frozen=True)
class FinalizerConfig:
    """The controller-side finalizer."""

    node_bundle_deadline_s: float = 20.0  # wait this long for node bundles after the job's end
    poll_interval_s: float = 1.0
    sacct_retries: int = 5
    sacct_retry_delay_s: float = 2.0
    command_timeout_s: float = 20.0  # every sacct/scontrol/sacctmgr call
    history_days: int = 30  # node history window for the repeat-offender rule
    app_log_tail_bytes: int = 4 << 20  # tail of the job's StdOut/StdErr read into the bundle
    write_admin_comment: bool = True
    admin_comment_retry_s: float = 300.0  # keep retrying sacctmgr this long while the job is not in the DB
    done_retention_days: int = 14  # dedupe markers and assembled job bundles kept this long in the spool
    quarantine_retention_days: float = 90.0  # quarantined input kept this long for an admin to look at; 0: for ever
    backend: str = "auto"  # Slurm access: auto (pyslurm when it matches the installed Slurm) | cli | pyslurm
    log_file: str = ""  # the daemon's log file; empty: stderr (journald under systemd)
    store_write_budget_s: float = 2.0  # wait this long for a locked store, then spool the verdict and go on
    diagnosis_budget_s: float = 300.0  # one diagnosis; past it: again on the files' tails, then on the facts alone
    diagnosis_tail_bytes: int = 4 << 20  # what is kept of each evidence file when the budget ran out
    gap_connectors: tuple[str, ...] = ()  # watch connectors asked for the nodes whose bundle is missing (loki, ...)


@dataclass(frozen=True)
class RemediationConfig:
    """Opt-in draining of culprit nodes. Off by default."""

    drain: bool = False
    dry_run: bool = True
    max_nodes_per_hour: int = 2
    max_partition_percent: float = 5.0
    require_repeat_offender: bool = False
    categories: tuple[str, ...] = ("gpu_hardware", "gpu_memory", "nvlink", "network")
    state_file: str = "/var/lib/slurm-attrib/remediation.json"  # our drains, for the caps and for resume


@dataclass(frozen=True)
class StoreConfig:
    path: str = "/var/lib/slurm-attrib/store.sqlite"
    busy_timeout_s: float = 30.0
    max_bundle_bytes: int = 16 << 20


@dataclass(frozen=True)
class ServiceConfig:
    """The attribution service (``slurm-attrib serve``): REST API, node-bundle receiver, dashboard."""

    host: str = "127.0.0.1"  # loopback only unless an admin says otherwise
    port: int = 8470
    token_file: str = "/etc/slurm-attrib/service-tokens"  # root-only; one bearer token a line, '#' comments
    read_token_required: bool = False  # reads (GET) need a token too
    node_networks: tuple[str, ...] = ()  # CIDRs whose epilogs may POST node bundles without a token
    max_request_bytes: int = 64 << 20  # body of one POST (the compressed bundle)
    max_entries: int = 10000  # members of one bundle archive
    max_unpacked_bytes: int = 512 << 20  # all members together, unpacked
    max_ratio: float = 200.0  # unpacked bytes per compressed byte (a gzip bomb stops here)
    rate_per_s: float = 50.0  # requests per second per client address (token bucket)
    rate_burst: int = 200
    workers: int = 4  # threads that run the engine for POST /v1/diagnoses at once
    read_threads: int = 0  # threads that serve reads (store queries, pages); 0: the CPUs, at least 2, at most 8
    processes: int = 1  # server processes sharing the port (each its own threads, engines and rate limit)
    ssl_certfile: str = ""  # TLS, with ssl_keyfile; else terminate TLS at a reverse proxy
    ssl_keyfile: str = ""


@dataclass(frozen=True)
class HttpConfig:
    """How a connector reaches an HTTP backend (Loki, Prometheus): every field of it is shared."""

    url: str = ""  # empty: the connector is off (its coverage line says skipped)
    timeout_s: float = 10.0  # one request; the connector's whole budget bounds the retries too
    retries: int = 3  # more tries after a 429, a 5xx or a refused connection, with exponential backoff
    backoff_s: float = 0.5  # first wait; doubles each retry, capped at 8 s (a Retry-After up to that cap wins)
    max_bytes: int = 16 << 20  # evidence written into the bundle by this connector, and one response's body
    verify_tls: bool = True  # check the server's certificate (https)
    ca_bundle: str = ""  # a CA file for a site's own certificate authority
    token_file: str = ""  # root-only file: its first token is sent as `Authorization: Bearer`
    username: str = ""  # basic auth, with password_file
    password_file: str = ""  # root-only file: its first line is the basic-auth password
    headers: tuple[tuple[str, str], ...] = ()  # more request headers, e.g. {X-Scope-OrgID: tenant}


@dataclass(frozen=True)
class LokiConfig(HttpConfig):
    """Kernel and job logs shipped to Loki (LogQL ``query_range``)."""

    host_label: str = "host"  # the stream label that holds the node name
    kernel_selector: str = '{job="kernel"}'  # the kernel log streams; the host matcher is added per node
    app_selector: str = '{job="slurm"}'  # the job's output streams; job_label's matcher is added
    job_label: str = "slurm_job_id"  # the label that holds the job id on app streams ("" = host only)
    page_limit: int = 5000  # entries per query (Loki's max_entries_limit_per_query defaults to 5000)
    max_pages: int = 200  # per stream selector; the coverage says when it stopped early


@dataclass(frozen=True)
class PrometheusMetrics:
    """Metric names (dcgm-exporter's defaults); "" leaves a signal out."""

    xid: str = "DCGM_FI_DEV_XID_ERRORS"
    ecc_dbe_volatile: str = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    ecc_sbe_volatile: str = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
    remapped_rows_uncorrectable: str = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
    row_remap_pending: str = "DCGM_FI_DEV_ROW_REMAP_PENDING"
    row_remap_failure: str = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
    nvlink_crc_flit: str = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    nvlink_crc_data: str = "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"
    nvlink_replay: str = "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"
    nvlink_recovery: str = "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"
    pcie_replay: str = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    clock_throttle_reasons: str = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    gpu_temp: str = "DCGM_FI_DEV_GPU_TEMP"
    power_usage: str = "DCGM_FI_DEV_POWER_USAGE"


@dataclass(frozen=True)
class PrometheusConfig(HttpConfig):
    """GPU telemetry kept by Prometheus (dcgm-exporter series, PromQL ``query_range``)."""

    host_label: str = "Hostname"  # the label that holds the node name (dcgm-exporter's default)
    gpu_label: str = "gpu"  # the GPU index label
    uuid_label: str = "UUID"
    pci_label: str = "pci_bus_id"
    step_s: float = 15.0  # query_range resolution (the scrape interval is a good choice)
    throttle_min_fraction: float = 0.2  # a GPU slowed by hardware this part of the job window is a straggler
    metrics: PrometheusMetrics = field(default_factory=PrometheusMetrics)


@dataclass(frozen=True)
class KubernetesConfig:
    """Pod logs, pod events and Kueue Workloads through the Kubernetes API (extra `connectors`)."""

    enabled: bool = False
    kubeconfig: str = ""  # empty: the in-cluster service account, else ~/.kube/config
    context: str = ""  # a kubeconfig context other than the current one
    namespaces: tuple[str, ...] = ()  # where Kueue Workloads are discovered; empty: all namespaces
    timeout_s: float = 10.0  # one API call
    retries: int = 3  # more tries after a 429 or 5xx
    max_log_bytes: int = 4 << 20  # tail of one container's log
    max_bytes: int = 32 << 20  # all that one workload's pods write into the bundle
    annotate: bool = False  # write the verdict onto the Workload (slurm-attrib.io/verdict)


@dataclass(frozen=True)
class WatchConfig:
    """``slurm-attrib watch``: discover finished workloads, collect, diagnose, hand the verdict on."""

    interval_s: float = 60.0  # between discovery rounds (without --once)
    window_before_s: float = 300.0  # evidence read from this long before a workload's start
    window_after_s: float = 60.0  # ... to this long after its end
    lookback_s: float = 7200.0  # a round discovers workloads that ended this long ago at most
    connectors: tuple[str, ...] = ("files", "loki", "prometheus", "kubernetes")  # the order they run in
    connector_budget_s: float = 60.0  # one connector for one workload
    sinks: tuple[str, ...] = ("stdout",)  # stdout, store, annotate (AdminComment or Workload), service
    service_url: str = ""  # the `service` sink POSTs bundles here (e.g. http://127.0.0.1:8470)
    service_token_file: str = ""  # root-only file with the service's write token
    state_file: str = "/var/lib/slurm-attrib/watch-seen.json"  # workloads already diagnosed


@dataclass(frozen=True)
class Config:
    cluster: str = ""
    rules_dir: str = "/etc/slurm-attrib/rules.d"
    engine: EngineSettings = field(default_factory=EngineSettings)
    spool: SpoolConfig = field(default_factory=SpoolConfig)
    collector: CollectorConfig = field(default_factory=CollectorConfig)
    finalizer: FinalizerConfig = field(default_factory=FinalizerConfig)
    remediation: RemediationConfig = field(default_factory=RemediationConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)
    loki: LokiConfig = field(default_factory=LokiConfig)
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)
    kubernetes: KubernetesConfig = field(default_factory=KubernetesConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    sources: tuple[str, ...] = ()  # the files that were read, in order


T = TypeVar("T")


def load_config(path: Optional[str] = None) -> Config:
    """Read the main file (if it exists) and its ``conf.d`` drop-ins; defaults for the rest."""
    main = Path(path or os.environ.get(ENV_PATH) or DEFAULT_PATH)
    merged: dict[str, Any] = {}
    sources: list[str] = []
    candidates = [main] + (sorted((main.parent / "conf.d").glob("*.yaml")) if main.parent.is_dir() else [])
    for file in candidates:
        if not file.is_file():
            continue
        data = _read(file)
        _merge(merged, data)
        sources.append(str(file))
    config = _build(Config, merged, "config")
    return _replace(config, sources=tuple(sources))


def _read(file: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ConfigError(f"{file}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top level")
    return data


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _build(cls: type[T], data: Any, where: str) -> T:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping")
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(known) - {"sources"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    defaults = cls()
    for name, value in data.items():
        current = getattr(defaults, name)
        if is_dataclass(current):
            values[name] = _build(type(current), value, f"{where}.{name}")
        elif isinstance(current, tuple):
            values[name] = _tuple(name, value, where)
        else:
            values[name] = _scalar(current, value, f"{where}.{name}")
    return cls(**values)


def _tuple(name: str, value: Any, where: str) -> tuple[Any, ...]:
    if isinstance(value, dict):  # e.g. node_history: {node-01: 3}
        return tuple(sorted((str(k), v) for k, v in value.items()))
    if not isinstance(value, list):
        raise ConfigError(f"{where}.{name}: expected a list")
    return tuple(value)


def _scalar(current: Any, value: Any, where: str) -> Any:
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
        return value
    if isinstance(current, (int, float)) and not isinstance(current, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number")
        return type(current)(value)
    if isinstance(current, str):
        if not isinstance(value, (str, int, float)):
            raise ConfigError(f"{where}: expected a string")
        return str(value)
    return value


def _replace(config: Config, **changes: Any) -> Config:
    from dataclasses import replace

    return replace(config, **changes)
