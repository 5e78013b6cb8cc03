#!/bin/sh
# slurm-attrib node Epilog (slurm.conf: Epilog=/usr/libexec/slurm-attrib/slurm-attrib-epilog.sh).
#
# slurmd runs this as root on every node of every job, with no PATH, while the node sits in
# COMPLETING. A non-zero exit, a timeout or a missing interpreter DRAINS the node, so this wrapper
# cannot fail: no `set -e`, no eval, every job-supplied string quoted, the collector run under
# `timeout -k`, and an unconditional `exit 0` at the end. It never runs a Slurm command.
#
# Fast path: a job that ended with SLURM_JOB_EXIT_CODE2=0:0 and SLURM_JOB_DERIVED_EC=0 returns at
# once without starting Python. TIMEOUT, CANCELLED and NODE_FAIL jobs ALSO look like that here
# (Slurm sets no job state for the Epilog), so their node bundles are not collected and the
# finalizer diagnoses them from the controller's evidence only (state, sacct). To collect for every
# job, create the flag file $SLURM_ATTRIB_ETC/capture-always (written by
# `slurm-attrib epilog-config` from collector.capture_always) or set SLURM_ATTRIB_CAPTURE_ALWAYS=1.
#
# Settings (the installer writes $SLURM_ATTRIB_ETC/epilog.conf, key=value, never sourced):
#   budget=10        seconds for the collector; it is killed (TERM, then KILL 2 s later) after that.
#                    Keep budget + 3 s below PrologEpilogTimeout (25.05+: EpilogTimeout).
#   python=PATH      the interpreter (default /usr/libexec/slurm-attrib/python, else /usr/bin/python3)
#   log_file=PATH    where the collector's output and this wrapper's line go when logger is missing
#   config=PATH      the YAML configuration passed to the collector (default: its own default)
# The environment variables SLURM_ATTRIB_BUDGET, SLURM_ATTRIB_PYTHON and SLURM_ATTRIB_LOG override
# the file (for tests; slurmd does not pass them). SLURM_ATTRIB_ETC defaults to /etc/slurm-attrib.

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 027

etc=${SLURM_ATTRIB_ETC:-/etc/slurm-attrib}

if [ "${SLURM_JOB_EXIT_CODE2-}" = "0:0" ] && [ "${SLURM_JOB_DERIVED_EC-}" = "0" ] &&
   [ "${SLURM_ATTRIB_CAPTURE_ALWAYS-}" != "1" ] && [ ! -e "$etc/capture-always" ]; then
    exit 0
fi

budget=10
python=/usr/libexec/slurm-attrib/python
log_file=/var/log/slurm-attrib/epilog.log
config=
if [ -f "$etc/epilog.conf" ] && [ -r "$etc/epilog.conf" ]; then
    while IFS='=' read -r key value || [ -n "$key" ]; do
        case $key in
            budget) budget=$value ;;
            python) python=$value ;;
            log_file) log_file=$value ;;
            config) config=$value ;;
        esac
    done < "$etc/epilog.conf"
fi
[ -n "${SLURM_ATTRIB_BUDGET-}" ] && budget=$SLURM_ATTRIB_BUDGET
[ -n "${SLURM_ATTRIB_PYTHON-}" ] && python=$SLURM_ATTRIB_PYTHON
[ -n "${SLURM_ATTRIB_LOG-}" ] && log_file=$SLURM_ATTRIB_LOG

case $budget in
    '' | *[!0-9.]* | *.*.* | .* | *.) budget=10 ;;
    *[1-9]*) ;;
    *) budget=10 ;;  # 0, 00, 0.0: to timeout(1) a zero duration means no limit at all
esac
case $log_file in
    /*) ;;
    *) log_file=/dev/null ;;
esac
[ -d "${log_file%/*}" ] && [ -w "${log_file%/*}" ] || log_file=/dev/null

say() {
    if [ -x /usr/bin/logger ]; then
        /usr/bin/logger -t slurm-attrib -- "$1" 2>/dev/null
    else
        printf '%s slurm-attrib: %s\n' "$(date '+%Y-%m-%dT%H:%M:%S%z' 2>/dev/null)" "$1" >>"$log_file" 2>/dev/null
    fi
}

what="epilog job=${SLURM_JOB_ID-?} node=${SLURMD_NODENAME-?} exit=${SLURM_JOB_EXIT_CODE2-?} derived=${SLURM_JOB_DERIVED_EC-?}"

if [ ! -f "$python" ] || [ ! -x "$python" ]; then
    if [ -f /usr/bin/python3 ] && [ -x /usr/bin/python3 ]; then
        python=/usr/bin/python3
    else
        say "$what: no interpreter ($python, /usr/bin/python3); nothing collected"
        exit 0
    fi
fi
if [ ! -x /usr/bin/timeout ]; then
    say "$what: /usr/bin/timeout missing; nothing collected"
    exit 0
fi

if [ -n "$config" ]; then
    set -- --config "$config"
else
    set --
fi
/usr/bin/timeout -k 2 "$budget" "$python" -m slurm_attrib.collect --budget "$budget" "$@" \
    </dev/null >>"$log_file" 2>&1
rc=$?
case $rc in
    0) say "$what: collected (budget ${budget}s)" ;;
    124 | 137) say "$what: collector stopped at the ${budget}s budget (status $rc); node not drained" ;;
    *) say "$what: collector exited with status $rc; node not drained" ;;
esac
exit 0
