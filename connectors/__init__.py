"""Evidence connectors (installed as ``slurm_attrib.connectors``).

Gatherers that run a tool once, bounded in time and bytes, and hand back what it printed for an
evidence bundle. Rules never run commands; they judge the bundle. Each gatherer takes its runner
or fetcher through the constructor, so tests inject fakes fed with real captured output.

Node side (used by the Epilog collector, :mod:`slurm_attrib.collect`):

- :mod:`.runner`: run a tool without a shell in its own process group, killed on timeout; states
  ``ok``/``error``/``timeout``/``skipped``; :class:`~.runner.FakeRunner` for tests.
- :mod:`.timeseek`: read a time window out of a large syslog file by binary search on line stamps.
- :mod:`.kernel_log`: the kernel log window (journald, else kern.log/messages/syslog, else dmesg).
- :mod:`.gpu`: ``nvidia-smi -q -x`` (and the facts parsed from it), ``dcgmi``, a dcgm-exporter scrape.
- :mod:`.node_facts`: boot time, zone, driver version, kernel, hostname.
- :mod:`.spool`: the node bundle's atomic hand-off (directory spool, HTTP POST, local fallback).

Controller-side sources (sacct history, job output, Loki, Prometheus) belong with the finalizer.
"""
