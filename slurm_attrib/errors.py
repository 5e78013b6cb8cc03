"""The one exception root of slurm-attrib and its subclasses, named for what failed."""


class AttribError(Exception):
    """Base of every error slurm-attrib raises on purpose."""

    exit_code = 1


class BundleError(AttribError):
    """An evidence bundle cannot be read (missing directory, unreadable job.yaml)."""

    exit_code = 2


class RuleError(AttribError):
    """A rule file is invalid; the message carries ``path:line``."""

    exit_code = 3


class CatalogError(AttribError):
    """A vendor data table (the XID catalog) is missing or malformed."""

    exit_code = 3


class ConfigError(AttribError):
    """The configuration is invalid."""

    exit_code = 2


class FinalizerRunning(AttribError):
    """Another finalizer holds the spool's lock: two would process every job twice."""

    exit_code = 75  # EX_TEMPFAIL: try again once the other one is gone
