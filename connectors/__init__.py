"""Connectors: the evidence sources (installed as ``slurm_attrib.connectors``).

In this project "connector" means one thing: an evidence source, an
:class:`~.base.EvidenceSource`. Given the workload (the job, its nodes) and the time window, it
gathers one kind of evidence, bounded in time and bytes, writes it into the bundle layout
(docs/bundle.md) and returns a :class:`~.base.SourceCoverage`: ok, empty, error, timeout or skipped,
with the reason and the command or query it ran. A connector never fails the diagnosis: what it
could not get is a coverage line. Rules never run commands; they judge the bundle. Each source takes
its outside system (a command runner, an HTTP fetcher, a Slurm backend) through its constructor, so
tests inject fakes fed with real captured output.

- :mod:`.base`: the interface, :func:`~.base.collect_all` (the bounded loop both sides drive the
  sources through: a source that raises or hangs becomes a coverage line) and
  :class:`~.base.FakeSource`.
- Node side (the Epilog collector, :mod:`slurm_attrib.collect`): :mod:`.kernel_log` (journald,
  else kern.log/messages/syslog time-seeked by :mod:`.timeseek`, else dmesg), :mod:`.gpu`
  (``nvidia-smi -q -x``, ``dcgmi``, a dcgm-exporter scrape), :mod:`.node_facts` (boot time, zone,
  driver, kernel, hostname).
- Controller side (the finalizer, :mod:`slurm_attrib.finalizer`): :mod:`.applog` (the job's
  StdOut/StdErr tails), :mod:`.sacct` (the job's rows, the nodes' failure history and events,
  through a :mod:`slurm_attrib.slurm` backend).
- Helpers that are not sources: :mod:`.runner` (run a tool without a shell, killed on timeout;
  :class:`~.runner.FakeRunner`), :mod:`.timeseek`, :mod:`.spool` (the node bundle's atomic hand-off).

Adding a source touches one module, its configuration section and its tests: a class with a
``name`` and ``collect(workload, window, bundle, limits)`` in its own module here, its settings
(command, URL, timeout, size cap) in its section of
:mod:`slurm_attrib.config`, and ``tests/connectors/test_<module>.py`` with captured output; then it
is listed where its side builds its plan (:meth:`slurm_attrib.collect.NodeSources.plan` or the
finalizer's gather step).
"""
