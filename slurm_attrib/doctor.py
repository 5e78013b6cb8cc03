"""``slurm-attrib doctor``: is this node (or controller) set up so that a failed job gets its evidence
and its verdict? Each check looks at one thing an install gets wrong and says how to fix it.

Node mode follows the Epilog's path: slurm.conf's ``Epilog=`` names the wrapper, the wrapper's settings
(``epilog.conf``) name an interpreter, that interpreter (run as slurmd runs it: a bare environment, no
PATH from a shell) imports the collector, the collector can write its log and its spool, and the tools
it reads are there. The classic silent failure: ``python=`` is a symlink to a virtualenv's interpreter,
which does not activate the virtualenv, so every Epilog exits 0 with nothing collected.

Controller mode follows the finalizer's: the Slurm commands answer, slurm.conf triggers the hook, the
hook's user (SlurmUser for EpilogSlurmctld) can write the queue, and the store's folder is writable.

Nothing here changes the system; every command it runs is bounded by a timeout.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .config import Config
from .connectors.runner import SAFE_PATH, CommandRunner, SubprocessRunner

OK, WARN, FAIL = "ok", "warn", "fail"
SLURM_CONF_PLACES = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/usr/local/etc/slurm.conf")
IMPORT_PROBE = ("import sys\ntry:\n    import slurm_attrib.collect, yaml\nexcept Exception as exc:\n"
                "    print('import failed:', type(exc).__name__, exc); sys.exit(3)\n"
                "print(slurm_attrib.collect.__file__, sys.prefix)\n")
TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Check:
    """One finding: ``state`` is ok, warn or fail; ``detail`` says what was seen and, if not ok, what to do."""

    name: str
    state: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "state": self.state, "detail": self.detail}


@dataclass(frozen=True)
class Place:
    """Where doctor looks: the wrapper's settings folder and slurm.conf (tests point them elsewhere)."""

    etc: Path = Path("/etc/slurm-attrib")
    slurm_conf: Optional[Path] = None  # None: $SLURM_CONF, else the usual places


def failed(checks: Sequence[Check]) -> bool:
    return any(c.state == FAIL for c in checks)


def node_checks(config: Config, place: Place, env: Mapping[str, str],
                runner: Optional[CommandRunner] = None) -> list[Check]:
    """The Epilog's path on this node, in the order the Epilog takes it."""
    runner = runner or SubprocessRunner()
    conf = SlurmConf.find(place.slurm_conf, env)
    checks = [conf.check(), _epilog_line(conf)]
    settings, check = _epilog_settings(place.etc)
    checks.append(check)
    interpreter = settings.get("python") or config.collector.interpreter
    checks.append(_interpreter(interpreter, runner))
    checks.append(_log_file(settings.get("log_file") or config.collector.log_file))
    checks.append(_spool(Path(config.spool.dir), "spool", may_be_absent=bool(config.spool.http_url)))
    checks.append(_fallback_spool(Path(config.spool.fallback_dir)))
    checks.extend(_tools(config, runner))
    return checks


def controller_checks(config: Config, place: Place, env: Mapping[str, str],
                      runner: Optional[CommandRunner] = None) -> list[Check]:
    """The finalizer's path on the controller."""
    runner = runner or SubprocessRunner(env={"PATH": SAFE_PATH, "LC_ALL": "C",
                                             **({"SLURM_CONF": env["SLURM_CONF"]} if env.get("SLURM_CONF") else {})})
    conf = SlurmConf.find(place.slurm_conf, env)
    checks = [conf.check(), _trigger(conf)]
    for command in ("sacct", "scontrol", "sacctmgr"):
        checks.append(_answers(runner, command))
    checks.append(_spool(Path(config.spool.dir), "spool"))
    checks.append(_hook_user(conf, Path(config.spool.dir)))
    checks.append(_store_folder(Path(config.store.path)))
    return checks


class SlurmConf:
    """``Key=Value`` lines of slurm.conf and the files it includes (keys case-insensitive, last wins)."""

    def __init__(self, path: Optional[Path], values: dict[str, str], problem: str = "") -> None:
        self.path, self.values, self.problem = path, values, problem

    @classmethod
    def find(cls, given: Optional[Path], env: Mapping[str, str]) -> SlurmConf:
        candidates = [given] if given else ([Path(env["SLURM_CONF"])] if env.get("SLURM_CONF") else
                                            [Path(p) for p in SLURM_CONF_PLACES])
        for path in candidates:
            if path.is_file():
                values: dict[str, str] = {}
                try:
                    _read_conf(path, values, 0)
                except OSError as exc:
                    return cls(path, {}, f"cannot read: {exc.strerror or exc}")
                return cls(path, values)
        where = ", ".join(str(p) for p in candidates)
        return cls(None, {}, f"no slurm.conf at {where} (set SLURM_CONF; configless nodes have none)")

    def get(self, key: str) -> str:
        return self.values.get(key.lower(), "")

    def check(self) -> Check:
        if self.path is None or self.problem:
            return Check("slurm.conf", WARN, self.problem)
        return Check("slurm.conf", OK, f"read {self.path}")


def _read_conf(path: Path, values: dict[str, str], depth: int) -> None:
    if depth > 8:
        return
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head, _, rest = line.partition(" ")
        if head.lower() == "include":
            pattern = rest.strip()
            target = pattern if pattern.startswith("/") else str(path.parent / pattern)
            for name in sorted(glob.glob(target)):
                _read_conf(Path(name), values, depth + 1)
            continue
        for item in line.split():
            key, sep, value = item.partition("=")
            if sep:
                values[key.lower()] = value


def _epilog_line(conf: SlurmConf) -> Check:
    if conf.path is None:
        return Check("Epilog", WARN, "slurm.conf not read: cannot tell whether the Epilog runs the wrapper")
    epilog = conf.get("Epilog")
    if not epilog:
        return Check("Epilog", FAIL, f"{conf.path} sets no Epilog=: no node bundle is ever collected (set "
                     "Epilog=/usr/libexec/slurm-attrib/slurm-attrib-epilog.sh, or call it from your Epilog)")
    paths = [p for p in epilog.split(",") if p]
    problems = [f"{p}: {why}" for p in paths if (why := _root_executable(Path(p)))]
    if problems:
        return Check("Epilog", FAIL, "; ".join(problems))
    ours = [p for p in paths if "slurm-attrib" in Path(p).name]
    if not ours:
        return Check("Epilog", WARN, f"Epilog={epilog}: make sure it runs slurm-attrib-epilog.sh")
    return Check("Epilog", OK, f"Epilog={epilog}")


def _root_executable(path: Path) -> str:
    """"" when slurmd can run ``path`` safely as root, else why not."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"cannot stat ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
        return "not an executable file"
    if st.st_uid != 0 or st.st_mode & 0o022:
        return "root runs it, yet it is not owned by root or is writable by others"
    return ""


def _epilog_settings(etc: Path) -> tuple[dict[str, str], Check]:
    path = etc / "epilog.conf"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, Check("epilog.conf", FAIL, f"{path} missing: the wrapper then runs its defaults (run "
                         "`slurm-attrib epilog-config` after every change of the configuration)")
    except OSError as exc:
        return {}, Check("epilog.conf", FAIL, f"{path}: cannot read ({exc.strerror or exc})")
    settings = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.startswith("#"):
            settings[key.strip()] = value.strip()
    return settings, Check("epilog.conf", OK, f"{path}: " + ", ".join(f"{k}={v}" for k, v in sorted(settings.items())))


def _interpreter(python: str, runner: CommandRunner) -> Check:
    """Run the wrapper's interpreter as slurmd would and import the collector with it."""
    path = Path(python)
    if not path.is_file() or not os.access(path, os.X_OK):
        return Check("interpreter", FAIL, f"{python}: not an executable file (the wrapper then tries "
                     "/usr/bin/python3)")
    link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
    result = runner.run([str(path), "-I", "-c", IMPORT_PROBE], TIMEOUT_S, 64 << 10)
    said = result.stdout.decode("utf-8", "replace").strip()
    if result.state == "ok":
        return Check("interpreter", OK, f"{python}{link} imports the collector: {said}")
    hint = (": a symlink to a virtualenv's python does not activate the virtualenv; point python= at the "
            "virtualenv's bin/python itself, or install slurm-attrib into that interpreter") if link else ""
    return Check("interpreter", FAIL, f"{python}{link} cannot run the collector ({said or result.reason})"
                 f"{hint}; every Epilog exits 0 with nothing collected")


def _log_file(log_file: str) -> Check:
    folder = Path(log_file).parent
    if not log_file.startswith("/"):
        return Check("log", WARN, f"log_file={log_file!r} is not absolute: the wrapper logs to /dev/null")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return Check("log", WARN, f"{folder} missing or not writable: the wrapper logs to /dev/null (create it "
                     "root-owned 0755)")
    return Check("log", OK, f"{log_file}")


def _spool(folder: Path, name: str, may_be_absent: bool = False) -> Check:
    try:
        st = folder.lstat()
    except FileNotFoundError:
        state = WARN if may_be_absent else FAIL
        return Check(name, state, f"{folder} missing (create it root-owned 0750, shared with the controller)")
    except OSError as exc:
        return Check(name, FAIL, f"{folder}: {exc.strerror or exc}")
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return Check(name, FAIL, f"{folder} is not a directory (a symbolic link is refused)")
    if st.st_mode & 0o002:
        return Check(name, FAIL, f"{folder} is writable by every user: anyone could plant evidence")
    if not os.access(folder, os.W_OK | os.X_OK):
        return Check(name, FAIL, f"{folder} is not writable by uid {os.geteuid()}")
    return Check(name, OK, f"{folder} (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})")


def _fallback_spool(folder: Path) -> Check:
    """The node-local fallback lives in a world-writable place (/var/tmp): it must be root's and 0700."""
    try:
        st = folder.lstat()
    except FileNotFoundError:
        return Check("fallback spool", OK, f"{folder} absent (made root-owned 0700 when first needed)")
    except OSError as exc:
        return Check("fallback spool", FAIL, f"{folder}: {exc.strerror or exc}")
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() \
            or stat.S_IMODE(st.st_mode) & 0o077:
        return Check("fallback spool", FAIL, f"{folder} is not a {os.geteuid()}-owned 0700 directory: a user may "
                     "have planted it; remove it")
    return Check("fallback spool", OK, f"{folder}")


def _tools(config: Config, runner: CommandRunner) -> list[Check]:
    collector = config.collector
    wanted = [("journalctl", collector.journald), ("dmesg", True), ("nvidia-smi", bool(collector.nvidia_smi)),
              ("dcgmi", bool(collector.dcgmi))]
    commands = {"nvidia-smi": collector.nvidia_smi, "dcgmi": collector.dcgmi}
    checks = []
    for name, enabled in wanted:
        if not enabled:
            checks.append(Check(name, OK, "disabled in the configuration"))
            continue
        found = runner.which(commands.get(name, name))
        checks.append(Check(name, OK, found) if found else
                      Check(name, WARN, f"{commands.get(name, name)} not found: that evidence is never collected"))
    if collector.kernel_log_path:
        checks.append(Check("kernel log", OK, f"kernel_log_path {collector.kernel_log_path}"))
    else:
        present = [f for f in collector.kernel_log_files if Path(f).is_file()]
        checks.append(Check("kernel log files", OK, ", ".join(present)) if present else
                      Check("kernel log files", WARN, "none of " + ", ".join(collector.kernel_log_files) +
                            " exists: without journald only the ring buffer (dmesg) is left"))
    return checks


def _trigger(conf: SlurmConf) -> Check:
    hook = conf.get("EpilogSlurmctld")
    jobcomp = conf.get("JobCompType")
    if jobcomp.lower() == "jobcomp/script":
        return Check("trigger", OK, f"JobCompType=jobcomp/script JobCompLoc={conf.get('JobCompLoc')}")
    if hook:
        return Check("trigger", WARN, f"EpilogSlurmctld={hook}: every ending job waits for it, and on Slurm 22.05 "
                     "short jobs then took 5.5x as long to schedule (bench/scheduler); prefer "
                     "JobCompType=jobcomp/script unless the site's JobCompType is taken")
    if conf.path is None:
        return Check("trigger", WARN, "slurm.conf not read: cannot tell what queues finished jobs")
    return Check("trigger", FAIL, "neither EpilogSlurmctld nor JobCompType=jobcomp/script is set: no job is ever "
                 "queued for a verdict (see etc/slurm.conf.d/slurm-attrib.conf)")


def _answers(runner: CommandRunner, command: str) -> Check:
    result = runner.run([command, "--version"], TIMEOUT_S, 4096)
    if result.state == "ok":
        return Check(command, OK, result.stdout.decode("utf-8", "replace").strip())
    return Check(command, FAIL, result.reason or result.state)


def _hook_user(conf: SlurmConf, spool: Path) -> Check:
    """EpilogSlurmctld runs as SlurmUser: that user must be able to write the queue."""
    user = conf.get("SlurmUser") or "root"
    if not conf.get("EpilogSlurmctld") or user == "root":
        return Check("hook user", OK, f"the hook runs as {user if conf.get('EpilogSlurmctld') else 'slurmctld'}")
    try:
        import pwd

        entry = pwd.getpwnam(user)
    except (KeyError, ImportError):
        return Check("hook user", FAIL, f"SlurmUser={user} is not a known user")
    queue = spool / "queue"
    target = queue if queue.is_dir() else spool
    try:
        st = target.stat()
    except OSError:
        return Check("hook user", FAIL, f"{target} missing: the hook (as {user}) cannot queue jobs")
    writable = (st.st_uid == entry.pw_uid and st.st_mode & 0o200) or \
        (st.st_gid == entry.pw_gid and st.st_mode & 0o020) or st.st_mode & 0o002
    if not writable:
        return Check("hook user", FAIL, f"EpilogSlurmctld runs as SlurmUser={user}, who cannot write {target} "
                     f"(owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): every job is lost silently; "
                     f"chgrp {entry.pw_gid} it and make it group-writable, or use JobCompType=jobcomp/script")
    return Check("hook user", OK, f"SlurmUser={user} can write {target}")


def _store_folder(path: Path) -> Check:
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return Check("store", FAIL, f"{path} is not writable: verdicts pile up in the spool")
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        return Check("store", FAIL, f"{folder} missing or not writable (SQLite needs the folder for its journal)")
    return Check("store", OK, f"{path}" + ("" if path.exists() else " (created on the first verdict)"))


def report(checks: Sequence[Check]) -> str:
    width = max((len(c.name) for c in checks), default=0)
    return "".join(f"{c.state:<5} {c.name:<{width}}  {c.detail}\n" for c in checks)


def as_json(checks: Sequence[Check]) -> dict[str, Any]:
    return {"failed": failed(checks), "checks": [c.to_dict() for c in checks]}
