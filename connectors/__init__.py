"""Evidence connectors (installed as ``slurm_attrib.connectors``).

Gatherers that run a tool once and write what it printed into an evidence bundle (kernel log
window, GPU snapshot, sacct history, job output). Rules never run commands; they judge the bundle.
The node and controller collectors arrive with the Slurm integration; until then bundles are
assembled by hand or by tests (see README, "The evidence bundle").
"""
