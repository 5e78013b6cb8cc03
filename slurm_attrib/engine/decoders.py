"""Line decoders named by extract rules (``emit.decoder``): structured payloads YAML cannot parse.

Each decoder refines a freshly extracted symptom (fields, GPU, role, category, strength, summary)
from the matched line and its neighbours; returning False drops the hit (e.g. a line that looked
like an Xid but does not parse as one).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, Optional

from ..model import Symptom
from ..nvidia.assess import XidAssessment, assess_sxid, assess_xid
from ..nvidia.decode import decode_containment, decode_nvlink5, decode_xid74, decode_xid154
from ..nvidia.parse import (
    XidEvent,
    caused_by_previous,
    normalise_pci,
    parse_fallen_off_bus,
    parse_gpu_uuid,
    parse_sxid,
    parse_xid,
)
from ..scan import Line
from ..timestamps import TimeContext, parse_line_time
from .context import EngineContext
from .nodes import job_node, match_node
from .ranks import after_log_prefix, split_rank, stream_key
from .registry import decoder

_TRACEBACK_HEAD = "Traceback (most recent call last)"


def _driver(ctx: EngineContext, node: str | None) -> str | None:
    facts = ctx.bundle.facts_for(node)
    return facts.driver_version if facts else None


def _apply(sym: Symptom, assessment: XidAssessment) -> None:
    sym.role, sym.category, sym.responsible = assessment.role, assessment.category, assessment.responsible
    sym.strength, sym.summary, sym.actions = assessment.strength, assessment.summary, assessment.actions
    if assessment.readings:
        sym.fields["readings"] = list(assessment.readings)


# a fatal error block's message that is a failed GPU, communication or memory call ('Asynchronous H2D copy failed:
# an illegal memory access', 'cudaStreamSynchronize failed', 'Not enough memory'): the rules that read those words
# judge it (the lines stay theirs to read); a message that only names GPUs in a setting of the run ('mismatching
# number of PP MPI processes and GPUs per node') is the run's
_DEFERRED_MESSAGE = re.compile(r"(?i)\bcuda\w*(?: error|Error| failure|_ERROR)|\bcuda\w* (?:call )?failed|\bhip\w*error"
                               r"|illegal (?:memory|address)|out of memory|not enough memory|failed to (?:re)?alloc"
                               r"|cannot allocate|\bNCCL\b|\bECC\b|device-side|copy failed|launch failure")


@decoder("message_below")
def decode_message_below(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A bare heading ('Fatal error:' in GROMACS's block) whose message is on the lines below it, each under the same
    rank prefix as the heading, up to the blank or dashed line that ends it: the message is the symptom's; none, no
    symptom. One that names the GPU, the communication layer or memory makes the heading context."""
    stream = stream_key(extra.get("stream"))
    parts: list[str] = []
    for text in line.iter_following(6):
        prefix, rest = split_rank(text)
        rest = rest.strip()
        if stream_key(prefix) != stream or not rest or set(rest) <= set("-="):
            break
        parts.append(rest)
    message = " ".join(parts)[:240]
    if not message:
        return False
    sym.fields["message"] = message
    if _DEFERRED_MESSAGE.search(message):
        sym.role, sym.strength = "context", 0
        sym.notes.append("the message names the GPU, the communication layer or memory: read by their rules")
    return True


@decoder("nvidia_xid")
def decode_xid(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    driver = _driver(ctx, sym.node)
    read = _read_xid(extra["text"], driver, extra.get("memo"))
    if read is None:
        return False
    event, assessment, previous = read
    sym.gpu = event.pci
    sym.fields.update(code=event.code, pci=event.pci, message=event.message)
    for key, value in (("pid", event.pid), ("process", event.process), ("gpu_instance", event.gpu_instance),
                       ("compute_instance", event.compute_instance)):
        if value is not None:
            sym.fields[key] = value
    if previous is not None:
        sym.fields["caused_by_xid"] = previous
    _apply(sym, assessment)
    sym.fields.update(_xid_details(event, driver))  # made afresh: its payload is the symptom's own to change
    return True


_XID_HEAD = "NVRM: Xid"
XID_MEMO_ENTRIES = 512  # distinct Xid messages remembered per file: a flood repeats a few, a GPU's pid or code apart
XID_MEMO_CHARS = 1024  # a longer message is read each time, so the memo holds at most half a million characters


_XidReading = tuple[XidEvent, XidAssessment, Optional[int]]  # the event, its assessment, the Xid it says caused it


def _read_xid(text: str, driver: Optional[str], memo: Optional[dict[str, Any]]) -> Optional[_XidReading]:
    """:func:`parse_xid` of the line, the catalog's assessment of it and the Xid it says caused it, remembered in
    the file's decoder ``memo`` by the message: a faulting program can make the driver log an Xid for every kernel
    it launches, tens of thousands of lines that differ only in their stamps. Every match of parse_xid begins with
    its first ``NVRM: Xid``, so the text from there reads as the whole line does."""
    start = text.find(_XID_HEAD)
    if start < 0:
        return None
    message = text[start:]
    known: Optional[dict[tuple[str, Optional[str]], Optional[_XidReading]]] = \
        memo.setdefault("xid", {}) if memo is not None else None
    if known is not None and (message, driver) in known:
        return known[message, driver]
    event = parse_xid(message)
    found = None if event is None else (event, assess_xid(event, driver), caused_by_previous(event.message))
    if known is not None and len(message) <= XID_MEMO_CHARS and len(known) < XID_MEMO_ENTRIES:
        known[message, driver] = found
    return found


# a health monitor's word for an Xid is one step from the kernel's line, and a monitor keeps an Xid (or a test
# fault injected through it) until the node reboots, unstamped: it leads only where nothing the job logged does
_MONITOR_STRENGTH = 45


@decoder("health_monitor_xid")
def decode_monitor_xid(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An Xid as a GPU health monitor reports it (GPUd's 'XID 79(GPU has fallen off the bus) detected on
    PCI:0000:ae:00'): judged by the catalog as the kernel's line would be, weaker, on the GPU it names."""
    try:
        code = int(str(sym.fields.get("code")))
        pci = normalise_pci(str(sym.fields.get("pci", "")))
    except ValueError:
        return False
    event = XidEvent(pci=pci, code=code, gpu_instance=None, compute_instance=None, pid=None, process=None,
                     message=str(sym.fields.get("message", "")))
    sym.gpu = pci
    sym.fields.update(code=code, pci=pci)
    _apply(sym, assess_xid(event, _driver(ctx, sym.node)))
    sym.strength = min(sym.strength, _MONITOR_STRENGTH)
    return True


def _xid_details(event: XidEvent, driver: str | None) -> dict[str, Any]:
    """The decoded payload of the Xids that carry one, as plain data for the diagnosis."""
    decoded: Any = None
    if event.code == 74:
        decoded = decode_xid74(event.message)
    elif 144 <= event.code <= 150:
        decoded = decode_nvlink5(event.code, event.message, driver)
    elif event.code == 154:
        decoded = decode_xid154(event.message)
    elif event.code in (94, 95):
        decoded = decode_containment(event.message)
    return {"decoded": _plain(decoded)} if decoded is not None else {}


def _plain(value: Any) -> Any:
    """Dataclasses → dicts, tuples → lists, recursively, for canonical JSON."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in sorted(value.__dataclass_fields__)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


@decoder("nvidia_gpu_uuid")
def decode_uuid(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    parsed = parse_gpu_uuid(extra["text"])
    if parsed is None:
        return False
    sym.gpu, sym.fields["uuid"] = parsed
    sym.fields["pci"] = parsed[0]
    return True


@decoder("nvidia_sxid")
def decode_sxid(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    event = parse_sxid(extra["text"])
    if event is None:
        return False
    sym.fields.update(_plain(event))
    _apply(sym, assess_sxid(event))
    return True


@decoder("nvidia_fallen_off_bus")
def decode_fallen(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    joined = " ".join([extra["text"], *line.following(3)])
    pci = parse_fallen_off_bus(joined)
    if pci is None or "fallen off the bus" not in joined:
        return False
    sym.gpu = pci
    sym.fields["pci"] = pci
    _apply(sym, assess_xid(XidEvent(pci=pci, code=79, gpu_instance=None, compute_instance=None, pid=None,
                                          process=None, message="GPU has fallen off the bus"),
                              _driver(ctx, sym.node)))
    return True


# a GPU's PCI address in an NVRM line: 'GPU 0000:81:00.0: ...', '(PCI:0000:81:00)', 'GPU at PCI:0000:81:00'
_NVRM_PCI = re.compile(r"(?:PCI:|GPU (?:at PCI:)?)(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.\d)?)")


def _nvrm_gpu(text: str, line: Line, look_back: int) -> str | None:
    """The GPU an NVRM line names, else the one the nearest preceding NVRM line names."""
    for candidate in itertools.chain((text,), line.preceding(look_back)):
        found = _NVRM_PCI.search(candidate) if "NVRM" in candidate else None
        if found:
            try:
                return normalise_pci(found.group("pci"))
            except ValueError:
                continue
    return None


@decoder("nvidia_gpu_lost")
def decode_gpu_lost(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The driver's NV_ERR_GPU_IS_LOST status (0xF: 'GPU lost from the bus') is XID 79 by another name;
    the GPU is the one the line or the NVRM lines just before it name, else unknown (the node's)."""
    pci = _nvrm_gpu(extra["text"], line, 20)
    sym.gpu = pci
    if pci:
        sym.fields["pci"] = pci
    _apply(sym, assess_xid(XidEvent(pci=pci or "", code=79, gpu_instance=None, compute_instance=None, pid=None,
                                    process=None, message="GPU lost from the bus"), _driver(ctx, sym.node)))
    sym.summary = f"gpu lost from the bus (NV_ERR_GPU_IS_LOST) on {sym.node or '?'} gpu {pci or '?'}"
    return True


@decoder("nvidia_reset_required")
def decode_reset_required(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The GPU the line or the NVRM lines just before it name, else unknown (the node's)."""
    pci = _nvrm_gpu(extra["text"], line, 20)
    sym.gpu = pci
    if pci:
        sym.fields["pci"] = pci
    sym.summary = f"the driver marked gpu {pci or '?'} on {sym.node or '?'} for reset: {sym.fields.get('what', '')}"
    return True


@decoder("nvidia_gpu_unsupported")
def decode_gpu_unsupported(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The GPU the message's first line (this one or up to three before it) names by address; an invalid
    BAR is the node's firmware or hypervisor setting rather than the driver's choice."""
    sym.gpu = _nvrm_gpu(extra["text"], line, 3)
    if "PCI I/O region" in str(sym.fields.get("what", "")):
        sym.category = "node_failure"
        sym.actions = ("fix the node's BIOS (above-4G decoding, MMIO size) or the VM's MMIO window so the GPU's BARs "
                       "are valid (pci=realloc as a stopgap)",)
    return True


@decoder("nvidia_gpu_named")
def decode_gpu_named(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A GPU fault line of the driver's own: the GPU is the one it (or the NVRM line before it) names."""
    sym.gpu = _nvrm_gpu(extra["text"], line, 5)
    return True


@decoder("python_traceback")
def decode_traceback(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An exception line with a traceback header of the same rank before it is an uncaught exception;
    without one (the header was cut from a pasted log, or the line is only logged) it stays a weaker
    candidate (``fields.traceback_seen: false``)."""
    stream = stream_key(extra.get("stream"))
    exception = str(sym.fields.get("exception", "")).rsplit(".", 1)[-1]
    if exception in _RUNTIME_WRAPPERS and _device_error_follows(line, extra):
        return False  # XLA's 'JaxRuntimeError: INTERNAL: ...:' wraps the CUDA error its next lines name
    if exception == "TimeoutError" and any(_WORKER_WAIT.search(text) for text in line.preceding(8)):
        return False  # vLLM's engine gave up waiting on a worker that hung: a hang, whoever's; not the code's

    if exception == "KeyboardInterrupt":
        # someone stopped the program (Ctrl-C to srun, scancel --signal=INT): cancelled by its user, no error of
        # its code; a fault that made it stall first explains it (it is in no class of the causal model)
        sym.kind, sym.category, sym.responsible, sym.strength = "user_interrupt", "cancelled", "workload", 35
        sym.summary = f"rank {'?' if sym.rank is None else sym.rank} was interrupted (SIGINT: Ctrl-C or scancel)"
        sym.actions = ("the job was interrupted, not broken by its code: if it had stopped making progress before, "
                       "look for what it was waiting on (a link, a file system, a peer rank)",)
    message = str(sym.fields.get("message", ""))
    if (exception in _CODE_ERRORS and not _DEVICE_WORDS.search(message)) or _TENSOR_CODE_ERROR.search(message):
        sym.fields["code_error"] = True  # refine's causal model: no device fault explains it
    said = f"{sym.fields.get('exception', '')}: {sym.fields.get('message', '')}"
    if _CORRUPT_DATA.search(said) and not _NOT_THE_FILE.search(said):
        # bytes that came back wrong: a file the job wrote badly (or that is not what it expects) as often as a
        # file system that returned zeros or a short read; alone, both readings
        sym.category, sym.responsible, sym.strength = "unknown", "unknown", 40
        sym.fields["readings"] = ["storage", "application"]
    text = extra["text"]
    raised = text.find(f"{sym.fields.get('exception', '')}: ")
    flat = list(_FLAT_FRAME.finditer(text, 0, raised)) if raised > 0 and text[:raised].strip() else []
    if flat:  # a traceback whose line breaks a paste lost: the frames precede the exception on its line
        location = flat[-1].group(0).strip()  # the innermost, printed last
        sym.fields["location"] = location[:200]
        if _SPAWN_WRAPPER.search(location):
            sym.role, sym.strength = "cascade", 0
            sym.notes.append("raised by torch.multiprocessing.spawn for a child process that failed")
        return True
    for count, previous in enumerate(line.preceding(400)):
        prefix, rest = split_rank(previous)
        if stream_key(prefix) == stream and _opens_traceback(rest):
            sym.fields["traceback_lines"] = count + 1
            frames = [r for r in (split_rank(p) for p in line.preceding(count + 1)) if stream_key(r[0]) == stream]
            location = next((t.strip() for _, t in frames if t.strip().startswith("File ")), "")
            if location:
                sym.fields["location"] = location[:200]
            if _SPAWN_WRAPPER.search(location):  # the innermost frame: the lines are walked back from the error
                # torch.multiprocessing.spawn re-raising a child's end ('raise Exception(msg)', ProcessRaisedException,
                # ProcessExitedException): the child's own error or signal, printed beside it, is the cause
                sym.role, sym.strength = "cascade", 0
                sym.notes.append("raised by torch.multiprocessing.spawn for a child process that failed")
            return True
    if _carries_on(line, stream):
        return False
    sym.fields["traceback_seen"] = False
    sym.strength = min(sym.strength, 40)
    return True


# a traceback's frame on the exception's own line (app.python_exception's flattened branch)
_FLAT_FRAME = re.compile(r'(?:File "[^"\n]{1,400}|(?<!\S)[^"\s]{1,400})\.py", line \d{1,7}, in \S{1,200}')


# the frame of torch.multiprocessing's join() that re-raises a spawned child's failure in the parent
_SPAWN_WRAPPER = re.compile(r"torch[/\\]multiprocessing[/\\]spawn\.py\"")


# A CUDA / HIP error by its runtime or driver name ('CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access ...'),
# read by app.gpu_cuda_error_name
# the runtimes' exceptions that carry a device error under their own words (JAX / XLA); an ordinary exception whose
# message ends in a colon ('Error(s) in loading state_dict for X:') lists its own details below it
_RUNTIME_WRAPPERS = frozenset({"JaxRuntimeError", "XlaRuntimeError"})
_DEVICE_ERROR_NAME = re.compile(r"\bCUDA_ERROR_[A-Z_]{3,60}\b|\bcudaError[A-Z]\w{2,60}|\bhipError[A-Z]\w{2,60}")


def _device_error_follows(line: Line, extra: dict[str, Any]) -> bool:
    """Whether the matched text ends in a colon and one of the next two lines of its stream, indented as the
    message's continuation, names a CUDA/HIP error: XLA puts the error under its own words ('CUDA error: Could
    not synchronize CUDA stream:' / '  CUDA_ERROR_ILLEGAL_INSTRUCTION: an illegal instruction was encountered'),
    and the error is what decides."""
    text = str(extra.get("text", "")).rstrip()
    if not text.endswith(":") or _DEVICE_ERROR_NAME.search(text):
        return False
    stream = stream_key(extra.get("stream"))
    for following in line.following(2):
        prefix, rest = split_rank(following)
        if stream_key(prefix) == stream and rest[:1].isspace() and _DEVICE_ERROR_NAME.search(rest):
            return True  # an indented continuation of the same message, not another program's line
    return False


def _opens_traceback(text: str) -> bool:
    """The line opens a Python traceback, as printed or behind a logging prefix (a time, '- ERROR - ')."""
    text = text.lstrip(" \t")
    if text.startswith(_TRACEBACK_HEAD) or (text.startswith("^C") and text[2:].startswith(_TRACEBACK_HEAD)):
        return True  # a terminal echoes the Ctrl-C that raised a KeyboardInterrupt before its traceback
    rest = after_log_prefix(text) if _TRACEBACK_HEAD in text else None
    return rest is not None and rest.lstrip(" \t").startswith(_TRACEBACK_HEAD)


# vLLM's engine waiting on its workers' shared-memory queue or RPC (shm_broadcast.py, multiproc_executor.py)
_WORKER_WAIT = re.compile(r"shm_broadcast\.py|multiproc_executor\.py|\.dequeue\(|"
                          r"No available shared memory broadcast block")
# exceptions a program's own data or code raises (a missing key or column, a bad index, type or value, an
# assertion on its own values, a file or module that is not there): a GPU or link fault makes CUDA, NCCL or the OS
# fail with their own errors, not these (a ValueError about the device, 'Expected a cuda device', is left out by
# _DEVICE_WORDS)
_CODE_ERRORS = frozenset({"KeyError", "IndexError", "TypeError", "AttributeError", "NameError", "UnboundLocalError",
                          "AssertionError", "FileNotFoundError", "ModuleNotFoundError", "ZeroDivisionError",
                          "ValueError", "NotImplementedError", "SyntaxError", "IndentationError", "RecursionError",
                          "JSONDecodeError", "UnicodeDecodeError", "UnicodeEncodeError"})
_DEVICE_WORDS = re.compile(r"(?i)cuda|nccl|cudnn|cublas|device|gpu|xid|nvlink|ecc|hip\b|rocm")
# PyTorch's checks on the program's own tensors (TORCH_CHECK in ATen: shapes, sizes, dtypes, devices, indices,
# autograd misuse), raised as RuntimeError/ValueError/IndexError: a bug in the code or its data, whatever the
# message says about devices
_TENSOR_CODE_ERROR = re.compile(
    r"mat1 and mat2 shapes cannot be multiplied|The size of tensor a \(\d+\) must match the size of tensor b|"
    r"size mismatch for [\w.]+: copying a param|Expected all tensors to be on the same device|"
    r"Given groups=\d+, weight of size|shape '\[[^\]]*\]' is invalid for input of size|"
    r"Expected (?:input|target) batch_size \(\d+\) to match|expected scalar type \w+ but found \w+|"
    r"Sizes of tensors must match except in dimension|Target -?\d+ is out of bounds|"
    r"Trying to backward through the graph a second time|element 0 of tensors does not require grad")
# a read that found corrupt or truncated data: TensorFlow's DataLossError ('corrupted record at 0'), a torch
# checkpoint that is no zip archive, a pickle or safetensors header that does not parse
_CORRUPT_DATA = re.compile(r"DataLossError|[Cc]orrupted record at|[Tt]runcated record at|failed finding central "
                           r"directory|PytorchStreamReader failed reading|BadZipFile|File is not a zip file|"
                           r"UnpicklingError|invalid load key|Error while deserializing header")
# ... but some say the file is not the one the job meant to read at all: a Git LFS pointer ('version https://git-
# lfs...': torch.load's 'invalid load key, 'v'.', safetensors' header length read from 'version ' far too large),
# an HTML error page ('<'), a file of another format (safetensors' InvalidHeaderStart / InvalidHeaderDeserialization):
# the job's own download or path, not bytes a file system returned wrong
_NOT_THE_FILE = re.compile(r"Error while deserializing header: (?:HeaderTooLarge|InvalidHeaderStart|"
                           r"InvalidHeaderDeserialization|InvalidHeaderLength)|invalid load key, '(?:v|<)'")
_CARRY_ON = re.compile(r"\bINFO\b|\bWARNING\b|\bretry|\bRetry|\bretrying")
_NCCL_CHATTER = re.compile(r"\bNCCL (?:INFO|WARN)\b")
# what PyTorch warns as the process exits with its default process group alive (ProcessGroupNCCL's destructor,
# 2.4+; c10d's atexit check, 2.5+): the program ending, not going on
_EXIT_WARNING = re.compile(r"process group has NOT been destroyed before we destruct|"
                           r"destroy_process_group\(\) was not called before program exit")


def _carries_on(line: Line, stream: Any) -> bool:
    """The same stream logs on at INFO/WARNING or retries right after it: the exception was handled. NCCL's
    own INFO lines are not the program going on (its teardown after a crash logs them too), nor PyTorch's
    warning at exit that the process group was never destroyed."""
    for text in line.following(10):
        prefix, rest = split_rank(text)
        if stream_key(prefix) == stream and _CARRY_ON.search(rest) and not _NCCL_CHATTER.search(rest) \
                and not _EXIT_WARNING.search(rest):
            return True
    return False


_SUMMARY_FIELD = re.compile(r"^\s*(?P<key>rank|host|exitcode|time|traceback)\s*:\s*(?P<value>.*)$")


@decoder("cli_usage")
def decode_cli_usage(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """argparse prints 'usage: <prog> ...' right before its error: without it, '<prog>: error:' is some other
    tool's message and not read. A paste that kept only the usage's wrapped tail ('            [--tta N]
    [--local_rank LOCAL_RANK] ...', aligned under the program's name) still shows it."""
    wanted = f"usage: {sym.fields.get('prog', '')} "
    return any(wanted in text or _USAGE_TAIL.match(split_rank(text)[1]) for text in line.preceding(40))


# a wrapped line of argparse's usage: indented, then optional arguments in brackets ('[--eval-metric EVAL_METRIC]')
_USAGE_TAIL = re.compile(r"[ \t]{4,}\[-{1,2}[\w-]{1,64}(?: [A-Z_][A-Z0-9_]{0,63})?\]")


@decoder("torchrun_summary")
def decode_torchrun(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Read the 'Root Cause (first observed failure)' block of a torchrun ChildFailedError."""
    in_root = False
    for text in (split_rank(t)[1] for t in line.following(40)):
        if "Root Cause" in text:
            in_root = True
            continue
        if in_root:
            match = _SUMMARY_FIELD.match(text)
            if match:
                sym.fields[f"reported_{match['key']}"] = match["value"].strip()[:200]
            elif text.startswith("====="):
                break
    rank_text = str(sym.fields.get("reported_rank", ""))
    if rank_text.split(" ")[0].isdigit():
        sym.fields["reported_rank"] = int(rank_text.split(" ")[0])
    host = sym.fields.get("reported_host")
    if isinstance(host, str):
        node = match_node(ctx.job.node_set, host)
        if node:
            sym.fields["reported_node"] = node
    return True


# C++ exceptions whose message is another rule's line: PyTorch's own (the NCCL watchdog's DistBackendError, a
# CUDA error re-raised as c10::Error), Gloo's transport errors, NCCL's, netCDF's and HDF5's (app.netcdf_hdf_error)
_FRAMEWORK_EXCEPTION = re.compile(r"^(?:c10|torch|at|caffe2|gloo|nccl|ucc|netCDF|H5)::|DistBackendError|NCCL",
                                  re.IGNORECASE)
_WHAT = re.compile(r"(?:^|\s)what\(\):\s+(.*)")
_TERMINATE_HEADING = re.compile(r"terminate called after throwing|terminat(?:ing|e) (?:due to|with) uncaught exception")
# what ProcessGroupNCCL prints just before its watchdog throws (PyTorch 1.x-2.0: std::runtime_error, whose what()
# a paste or a cut log may lack)
_WATCHDOG_WORDS = re.compile(r"Watchdog caught collective operation timeout|Some NCCL operations have failed|"
                             r"ProcessGroupNCCL\.cpp:\d+\]")
# a SYCL runtime's error in the message ('-33 (PI_ERROR_INVALID_DEVICE)', 'UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY')
_SYCL_ERROR = re.compile(r"\b(?:PI|UR|ZE)_(?:RESULT_)?ERROR_([A-Z_]+)")
_SYCL_OUT_OF_DEVICE = frozenset({"OUT_OF_DEVICE_MEMORY", "OUT_OF_RESOURCES", "MEM_OBJECT_ALLOCATION_FAILURE"})
# the standard library's exceptions for a program's own logic errors (<stdexcept>, <typeinfo>, <variant>...)
_CXX_LOGIC = re.compile(r"^std::(?:logic_error|invalid_argument|domain_error|length_error|out_of_range|bad_cast|"
                        r"bad_any_cast|bad_variant_access|bad_optional_access|bad_function_call|bad_weak_ptr)$")


# Hydra's banner above its EXIT CODE line, and the rank's PID and host in it (mpiexec.c)
_HYDRA_BANNER = re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")
_HYDRA_RUNNING_AT = re.compile(r"=\s{1,8}(?:RANK \d{1,9} )?PID (?P<pid>\d{1,10}) RUNNING AT (?P<host>\S{1,255})")
# the signals of a crash in the process's own code: SIGSEGV, SIGFPE, SIGILL, SIGBUS, raw or as a shell's 128 + N
_CRASH_SIGNALS = {11: "Segmentation fault", 8: "Floating point exception", 4: "Illegal instruction", 7: "Bus error"}


@decoder("mpi_bad_termination")
def decode_mpi_bad_termination(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Hydra's EXIT CODE (or KILLED BY SIGNAL) line counts only under its banner. A crash signal is the workload's
    crash (a weak candidate, as a signal handler's own report); any other status is the launcher reporting a
    child's end."""
    above = list(line.preceding(3))
    if not any(_HYDRA_BANNER.search(text) for text in above):
        return False  # 'EXIT CODE: 1' of some other program's output
    running = next((m for m in map(_HYDRA_RUNNING_AT.search, above) if m is not None), None)
    if running is not None:
        sym.fields["pid"], sym.fields["running_at"] = int(running["pid"]), running["host"]
    code = int(sym.fields.get("code") or 0)
    signal = int(sym.fields.get("killed_by") or 0) or (code - 128 if code > 128 else code)
    if signal in _CRASH_SIGNALS:
        sym.fields["signal"], sym.fields["signame"] = signal, _CRASH_SIGNALS[signal]
        sym.kind, sym.role, sym.category, sym.responsible, sym.strength = (
            "native_crash", "candidate", "application", "workload", 30)
        said = f"killed by signal {signal}" if sym.fields.get("killed_by") else f"exit code {code}"
        sym.summary = f"a process crashed (mpiexec: {said}, {_CRASH_SIGNALS[signal]})"
        sym.actions = ("read the output of the rank that crashed just above the banner (a backtrace, the library at "
                       "its top); rerun with a debug build or the suspect transport disabled",)
    return True


@decoder("cxx_exception")
def decode_cxx_exception(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An exception no C++ handler caught: libstdc++'s verbose terminate handler names its type and prints
    ``what()`` on the next line of the same stream; libc++ puts both on one line. The program's own error,
    unless its message is a CUDA, NCCL or PyTorch error (their rules read that line) or a SYCL runtime's word
    that the device ran out of memory or was lost, or it has no message and follows ProcessGroupNCCL's lines
    (the watchdog's own throw). ``std::bad_alloc`` alone is not read as the node's memory: a size read from a
    corrupt input throws it as often as a full node, so both readings."""
    from .families import gpu as gpu_family

    exception = str(sym.fields.get("exception", "")).strip()
    message = str(sym.fields.get("message", "") or "")
    if not exception:
        # the handler's 'what():' line alone (a paste that kept only it, or output that dropped the line before):
        # the heading of the same stream just above reads it when it is there
        stream = stream_key(extra.get("stream"))
        if any(_TERMINATE_HEADING.search(text) and stream_key(split_rank(text)[0]) == stream
               for text in line.preceding(6)):
            return False
        exception = "(type not printed)"
    inline = _WHAT.search(extra["text"])  # a pasted log that lost its line breaks
    if inline is not None:
        message = sym.fields["message"] = inline.group(1).strip()[:300]
    if not message:
        stream = stream_key(extra.get("stream"))
        for text in line.following(6):
            prefix, rest = split_rank(text)
            what = _WHAT.match(rest.lstrip())
            if what is not None and stream_key(prefix) == stream:
                message = sym.fields["message"] = what.group(1).strip()[:300]
                break
    if _FRAMEWORK_EXCEPTION.search(exception) or "NCCL" in message or "gloo" in message:
        return False
    if not message and any(_WATCHDOG_WORDS.search(text) for text in line.preceding(10)):
        return False  # PyTorch 1.x's watchdog throws std::runtime_error itself: the abort after its timeout
    if gpu_family.classify_cuda(message) is not None:
        return False  # 'what(): CUDA error: ...': the CUDA rules read it, whoever threw it
    sycl = _SYCL_ERROR.search(message)
    if sycl is not None and sycl.group(1) == "DEVICE_LOST":
        return False  # app.gpu_device_lost
    if sycl is not None and sycl.group(1) in _SYCL_OUT_OF_DEVICE:
        gpu_family.apply_verdict(sym, gpu_family.GPU_OOM)
    elif sycl is not None and sycl.group(1) == "OUT_OF_HOST_MEMORY":
        sym.category, sym.strength = "host_oom", 45
    elif exception.endswith("bad_alloc"):
        sym.category, sym.responsible, sym.strength = "unknown", "unknown", 35
        sym.fields["readings"] = ["host_oom", "application"]
    elif _CXX_LOGIC.match(exception):
        sym.fields["code_error"] = True  # refine's causal model: no device fault explains it
    sym.summary = f"uncaught C++ exception {exception} on rank {'?' if sym.rank is None else sym.rank}: " \
                  f"{message}"[:300]
    return True


@decoder("jvm_memory")
def decode_jvm_memory(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A thread the JVM could not start is memory or the process limit (ulimit -u) alike: weaker. A heap cap
    the environment set ('Picked up _JAVA_OPTIONS: -Xmx3276M' before the error) is named: a site's profile may
    have set it, not the job."""
    error = str(sym.fields.get("error", ""))
    if "thread" in error.lower():
        sym.strength = 35
        sym.notes.append("a thread the JVM could not start: memory, or the process limit (ulimit -u)")
    picked = next((t for t in line.preceding(50) if "Picked up _JAVA_OPTIONS:" in t
                   or "Picked up JAVA_TOOL_OPTIONS:" in t), None)
    if picked is not None:
        sym.fields["java_options"] = picked.split("Picked up ", 1)[1][:200]
        sym.notes.append(f"the heap was set by the environment ({sym.fields['java_options']}), not the command line")
    return True


# The CUDA error catalog (names, numbers, texts and what each says about the cause) is
# ``families/gpu.py: CUDA_ERRORS``; NVML's strings ('GPU is lost') are its ``nvml_verdict``.


@decoder("cuda_error")
def decode_cuda(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Classify ``CUDA error: <text>`` by the error it names: hardware (ECC, NVLink, fabric), GPU
    memory exhaustion, the workload's own kernel bug, or undecided (refine.gpu_indeterminate_cuda_error)."""
    from .families import gpu as gpu_family

    if _device_error_follows(line, extra):
        return False  # a wrapper's words ('Could not synchronize CUDA stream:'): the error itself is read below
    if not gpu_family.classify_line(sym, extra["text"]):
        nvml = gpu_family.nvml_verdict(extra["text"])
        gpu_family.apply_verdict(sym, nvml or gpu_family.ENVIRONMENT)
    else:
        gpu_family.fabric_memory_call(ctx, sym, extra["text"], line)
    if "watchdog" in extra["text"].lower():
        sym.fields["via"] = "watchdog"
    return True


# Kernel modules whose frames in a hung task's call trace name the file system it waits on
# (kernel/hung_task.c prints the task, then sched_show_task() its stack: "[<addr>] fn+0x../0x.. [module]"
# on older kernels, " fn+0x../0x.. [module]" on newer ones).
_FS_MODULES = {
    "nfs": "NFS", "nfsv3": "NFS", "nfsv4": "NFS", "sunrpc": "NFS", "rpcsec_gss_krb5": "NFS",
    "lustre": "Lustre", "ptlrpc": "Lustre", "osc": "Lustre", "lov": "Lustre", "mdc": "Lustre", "lmv": "Lustre",
    "obdclass": "Lustre", "lnet": "Lustre", "ksocklnd": "Lustre", "ko2iblnd": "Lustre", "llite": "Lustre",
    "mmfs26": "GPFS", "mmfslinux": "GPFS", "mmfs": "GPFS", "ceph": "CephFS", "libceph": "CephFS",
    "beegfs": "BeeGFS", "cifs": "SMB", "fuse": "FUSE",
}
# The NVIDIA driver's modules: a task that waits in them for minutes waits for the GPU (a push that never
# completes, a channel that never drains) or for the driver's own locks
_GPU_DRIVER_MODULES = frozenset({"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem"})
_GPU_DRIVER = "GPU driver"
# x86 and arm64 print ' fn+0x1f/0x40 [module]' after the stamp or address; 32-bit ARM
# '[<80233190>] (fn) from [<803db1c4>] (caller+0x30/0x280)': the frame with an offset is the caller's
_FRAME = re.compile(r"(?<![\w.$])(?P<fn>[A-Za-z_][\w.]{0,127})\+0x[0-9a-f]{1,16}/0x[0-9a-f]{1,16}"
                    r"(?:\)?\s+\[(?P<mod>\w{1,64})\])?")
_NEXT_REPORT = ("blocked for more than", "soft lockup - CPU#")


def _waited_in(text: str) -> Optional[tuple[str, str, bool]]:
    """(file system, frame, reliable) of the first frame on a call-trace line that is a file system's module, or
    (_GPU_DRIVER, frame, reliable) for one of the NVIDIA driver's. A frame the unwinder marks '? ' is a stale
    return address it found on the stack, not a caller it is sure of: unreliable."""
    for frame in _FRAME.finditer(text):
        module = frame["mod"] or ""
        reliable = text[max(0, frame.start() - 2):frame.start()] != "? "
        filesystem = _FS_MODULES.get(module) or _FS_MODULES.get(frame["fn"].split("_", 1)[0])
        if filesystem:
            return filesystem, frame["fn"] + (f" [{module}]" if module else ""), reliable
        if module in _GPU_DRIVER_MODULES:
            return _GPU_DRIVER, f"{frame['fn']} [{module}]", reliable
    return None


@decoder("hung_task")
def decode_hung_task(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A task blocked in D state, or a CPU soft-locked: the call trace printed after it names where. A
    frame of a network or cluster file system's module makes it a storage fault (a shared service: no node
    is blamed); one of the NVIDIA driver's a GPU-side hang or the program's (both readings); otherwise the
    report alone is too weak to blame anything and stays context. The first frame the unwinder is sure of
    names it; a '? ' frame only when no sure one does."""
    found: Optional[tuple[str, str, bool]] = None
    for text in line.iter_following(60):
        if any(marker in text for marker in _NEXT_REPORT):
            break  # the next report's trace is not this one's
        here = _waited_in(text)
        if here is not None and (here[2] or found is None):
            found = here
            if here[2]:
                break
    if found and found[0] == _GPU_DRIVER:
        # waiting on the GPU or on the driver: the node's GPU side, or the program's own use of it (UVM
        # oversubscription thrashing); alone, both readings, and never strong enough to outweigh an error
        sym.kind, sym.role, sym.category, sym.strength = "gpu_driver_hang", "candidate", "gpu_hardware", 30
        sym.fields.update(frame=found[1], readings=["gpu_hardware", "application"])
        what = f"task {sym.fields['process']}" if sym.fields.get("process") else "a CPU"
        sym.summary = f"{what} hung in the NVIDIA driver ({found[1]})"
        sym.actions = ("check the node's GPUs (nvidia-smi, Xids around this time) and the driver; a task stuck "
                       "in nvidia_uvm waits for GPU work that never completes",)
        return True
    if found:
        filesystem, frame, _ = found
        sym.kind, sym.role, sym.category, sym.strength = "storage_hang", "candidate", "storage", 45
        sym.fields.update(filesystem=filesystem, frame=frame)
        what = f"task {sym.fields['process']}" if sym.fields.get("process") else "a CPU"
        sym.summary = f"{what} hung in {filesystem} I/O ({frame})"
        sym.actions = (f"check the {filesystem} servers and this node's path to them (the task waited "
                       "in the file system, not on the node's own hardware)",)
        return True
    sym.role, sym.strength = "context", 0
    return True


@decoder("oom_kill")
def decode_oom(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Pick up the memcg / job of an OOM kill from its report before it (the oom-kill record just before; an
    older kernel's 'Task in ... killed' above its memory stats and process table), not from an earlier kill's."""
    selected = f"Kill process {sym.fields.get('pid')} (" if not sym.fields.get("scope") else None
    for previous in line.preceding(400):
        match = _TASK_MEMCG.search(previous)
        if match:
            _record_memcg(sym, match.group(1) or match.group(2))
            break
        if selected and selected in previous:
            # an older kernel's kill line after its own 'Out of memory: Kill process N ... or sacrifice child':
            # the same kill, which that line already stands for
            sym.role, sym.strength = "context", 0
            selected = None
            continue
        if any(marker in previous for marker in _OOM_KILLED):
            break
    return True


# the killed task's memory cgroup: the oom-kill record (4.19+) or, before it, mm/memcontrol.c's
# 'Task in /slurm/uid_1000/job_42/step_0 killed as a result of limit of /slurm/uid_1000/job_42'
_TASK_MEMCG = re.compile(r"task_memcg=(\S+?),task=|Task in (\S+) killed as a result of limit of")


def _record_memcg(sym: Symptom, memcg: str) -> None:
    """The memory cgroup an OOM kill hit, and the Slurm job its path names (filter.oom_of_other_job)."""
    sym.fields["memcg"] = memcg
    job = re.search(r"job_(\d+)", memcg)
    if job:
        sym.fields["memcg_job"] = job.group(1)


_OOM_RECORD = re.compile(r"oom-kill:constraint=\w+,.*?task_memcg=(?P<memcg>[^,\s]*)")
_OOM_KILLED = ("Killed process", "Kill process")


@decoder("oom_invoked")
def decode_oom_invoked(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The kill this invocation led to: its record gives the memcg (and the job it names); its 'Killed
    process' line is the symptom that decides, so this one steps back to context."""
    for text in line.iter_following(400):
        if "invoked oom-killer:" in text:
            break  # the next OOM's header: this one's kill lines were not logged
        record = _OOM_RECORD.search(text)
        if record:
            _record_memcg(sym, record["memcg"])
        if any(marker in text for marker in _OOM_KILLED):
            sym.role, sym.strength = "context", 0
            break
    return True


@decoder("oom_record")
def decode_oom_record(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The kill's record names its memcg (and job); the 'Killed process' line after it, when logged,
    is the symptom that decides, so the record steps back to context."""
    _record_memcg(sym, str(sym.fields.get("memcg", "")))
    if any(marker in text for text in line.iter_following(3) for marker in _OOM_KILLED):
        sym.role, sym.strength = "context", 0
    return True


@decoder("memcg_oom_report")
def decode_memcg_report(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A memory cgroup's OOM report: its memcg (the 'Task in' line, or the one above the usage line) names the
    job; the kill's own line after it, when logged, decides, so the report steps back to context. Only the
    report's first line counts as the candidate: the usage line under a 'Task in' line is the same report."""
    memcg = sym.fields.get("memcg") or sym.fields.get("limit_memcg")
    if memcg is None:
        for previous in line.preceding(3):
            match = _TASK_MEMCG.search(previous) or _LIMIT_MEMCG.search(previous)
            if match:
                return False  # the report's first line is the symptom
    if memcg is not None:
        _record_memcg(sym, str(memcg))
    for text in line.iter_following(400):
        if "invoked oom-killer:" in text or _TASK_MEMCG.search(text):
            break  # the next report: this one's kill was not logged
        if any(marker in text for marker in _OOM_KILLED):
            sym.role, sym.strength = "context", 0
            break
    return True


_LIMIT_MEMCG = re.compile(r"Memory limit reached of cgroup (\S+)")


# a node that has just booted needs this long before a job runs on it (services, slurmd's registration): a boot
# stamped up to this long after the job's start is the node's clock or the job's start set differently, not a
# reboot under the job
_BOOT_TO_JOB_S = 60.0


@decoder("boot_marker")
def decode_boot_marker(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A boot stamped inside the job's own window (more than :data:`_BOOT_TO_JOB_S` after its start, not after
    its end): the node went down under the running job and came back, a crash, a power loss or a reset whatever
    the lines before it say. A boot before the job is the node's history; one whose time is only inferred from
    its neighbours, or a window taken from the evidence itself, decides nothing."""
    start, end = ctx.window_start, ctx.window_end
    if sym.time is None or sym.fields.get("time_inferred") or start is None or end is None \
            or ctx.window_source != "job":
        return True
    if start + ctx.tolerance(_BOOT_TO_JOB_S) < sym.time <= end:
        sym.role, sym.category, sym.responsible, sym.strength = "candidate", "node_failure", "infrastructure", 70
        sym.summary = f"{sym.node or 'the node'} booted again during the job: it went down under it (a crash, a " \
                      "power loss or a reset)"
        sym.actions = ("find why the node went down (its console or BMC log, kdump, the reset reason of the next "
                       "boot) before returning it to service",)
    return True


# what a failed health check's name says failed (NHC's check_* functions and the checks sites add in their style)
_CHECK_CATEGORIES = ((re.compile(r"ecc|remap|retired", re.I), "gpu_memory"),
                     (re.compile(r"gpu|nv(?:idia|_|smi|link)|xid|dcgm", re.I), "gpu_hardware"),
                     (re.compile(r"(?:^|_)(?:ib|eth|net|nic|rdma)(?:_|$)|infiniband", re.I), "network"),
                     (re.compile(r"(?:^|_)(?:fs|file|mount|disk)(?:_|$)", re.I), "storage"))


# a health check's word that it could not run: an environment variable its script needs (a name with an underscore:
# HPCX_DIR, not a mode such as "ECC is not set"), a toolkit not installed or sourced in its environment
_CHECK_NOT_RUN = re.compile(r"\b[A-Z][A-Z0-9]{0,20}_[A-Z0-9_]{1,40} is not set\b"
                            r"|\b(?:is|are) not (?:installed and )?sourced\b")


# a check that measured performance against a threshold, or found links down that only slow a path
_CHECK_DEGRADED = re.compile(r"(?i)\bis less than \d|\bexpected\s*>=?\s*\d|\bbut measured\b|"
                             r"\b(?:below|lower than) (?:the )?(?:threshold|expected)|\bnvlinks? (?:are |is )?inactive")


# ... but a path measured at nothing, or every link of a GPU inactive, is a dead part, not a slow one
_CHECK_DEAD = re.compile(r"(?i)\bmeasured 0(?:\.0+)?(?![\d.])|\b(?:bandwidth|bw) 0(?:\.0+)? is less than\b"
                         r"|\ball nvlinks?\b")


@decoder("health_check")
def decode_health_check(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A failed health check is its node's fault of the kind its check names; a runner that prefixes each host
    ('mynode-066 | ERROR: ...') places it on that job node, else the file's."""
    host = sym.fields.get("host")
    named = job_node(ctx, host) if isinstance(host, str) else None
    if named:
        sym.node = named
    check, what = str(sym.fields.get("check", "")), str(sym.fields.get("what", ""))
    if _CHECK_NOT_RUN.search(what):
        # the check could not run: its own environment (a variable its script needs, a toolkit not sourced) is the
        # health-check set-up's, which says nothing of the node (azurehpc-health-checks #72: HPCX_DIR is not set)
        sym.role, sym.strength = "context", 0
        sym.notes.append("the health check could not run in its environment: no word on the node")
        return True
    sym.category = next((category for pattern, category in _CHECK_CATEGORIES if pattern.search(check)), "node_failure")
    if sym.category in ("gpu_memory", "gpu_hardware"):
        sym.kind = "gpu_diag_fault"  # a GPU fault of the causal model's gpu_fault class, as dcgmi diag's
    if _CHECK_DEGRADED.search(what) and not _CHECK_DEAD.search(what) and ctx.job.state not in ("TIMEOUT", "DEADLINE"):
        # a bandwidth measured below the check's threshold, NVLinks reported inactive: a slower path, not a failing
        # one (NCCL routes around it), and as often a threshold or link count set for another SKU or a test's own
        # set-up (azurehpc-health-checks #142, #162) as a degraded part; it explains no failed job by itself (a job
        # that ran out of time keeps it: a slow node can be why; and a path measured at nothing is a dead part)
        sym.role, sym.strength = "context", 0
        sym.notes.append("the check measured a slower path than its threshold, which fails no job by itself (and "
                         "thresholds and link counts are set per SKU): rerun it by hand before draining the node")
    return True


@decoder("memory_hw_error")
def decode_memory_hw(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Uncorrected (EDAC UE, GHES fatal, a Machine Check Exception) is the node's fault; GHES 'recoverable'
    is weaker; corrected (EDAC CE, GHES corrected/info, a logged Machine Check) is context."""
    severity, ghes, mce = (str(sym.fields.get(k, "")) for k in ("severity", "ghes", "mce"))
    if "page" in sym.fields or "mce_kill" in sym.fields or "uncorrected" in sym.fields:
        return _decode_memory_failure(sym)
    if ghes and (pcie := _ghes_pcie_record(line)) is not None:
        return _decode_ghes_pcie(ctx, sym, line, ghes, *pcie)
    if ghes == "recoverable":
        sym.strength = 40
    elif severity == "CE" or ghes in ("corrected", "info") or (mce and "Exception" not in mce):
        sym.role, sym.strength = "context", 0
    return True


# the sections of a firmware-first error record (drivers/firmware/efi/cper.c: cper_estatus_print_section,
# cper_print_pcie) under the GHES header '{N}[Hardware Error]: event severity: ...', and the AER registers the
# kernel prints for a PCIe section (drivers/pci/pcie/aer.c pci_print_aer: '<driver> <BDF>: AER: aer_status: 0x...,
# aer_mask: 0x...')
_GHES_RECORD = re.compile(r"\{(\d{1,6})\}\[Hardware Error\]:")
_GHES_SECTION = re.compile(r"\{(?P<record>\d{1,6})\}\[Hardware Error\]:\s+"
                           r"(?:section_type: (?P<section>[^\n]{1,60}?)\s*$"
                           r"|device_id: (?P<device>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$"
                           r"|vendor_id: 0x(?P<vendor>[0-9a-fA-F]{4}), device_id: 0x[0-9a-fA-F]{4}"
                           r"|class_code: (?P<class>[0-9a-fA-F]{6})\s*$)")
_APEI_AER = re.compile(r"(?:(?P<driver>[\w-]{1,64}) )?(?P<device>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): "
                       r"(?:AER: )?aer_status: 0x[0-9a-fA-F]{8}")
_GHES_AER_SEVERITY = {"fatal": "Uncorrected (Fatal)", "recoverable": "Uncorrected (Non-Fatal)",
                      "corrected": "Corrected", "info": "Corrected"}


def _ghes_pcie_record(line: Line) -> Optional[tuple[str, str, str, str]]:
    """(device, vendor id, PCI class code, driver) of the PCIe section of the GHES record this header opens, from
    the record's own lines and the AER registers printed after it by the same writer; None for a record of another
    section (memory, processor) or one whose section the lines do not give."""
    opened = _GHES_RECORD.search(line.text)
    record = opened.group(1) if opened else None
    section = device = vendor = driver = klass = ""
    for text in line.iter_following(40):
        if not _same_writer(line.text, text):
            continue
        if "event severity: " in text:
            break  # the next record
        found = _GHES_SECTION.search(text)
        if found is not None and record in (None, found["record"]):
            section = section or (found["section"] or "")
            device = device or (found["device"] or "")
            vendor = vendor or (found["vendor"] or "")
            klass = klass or (found["class"] or "")
            continue
        aer = _APEI_AER.search(text)
        if aer is not None and device and aer["device"].lower() == device.lower():
            driver = aer["driver"] or ""
            break
    if section.lower() != "pcie error" or not device:
        return None
    return device.lower(), vendor.lower(), klass.lower(), driver


# whose device a driver-less record names, by its PCI class (the record's class_code): a network or InfiniBand
# controller (02, 0c06) the network's, a storage controller (01) the node's; a display or 3D controller (03: the GPU)
# and anything else stay the GPU's, as for the root port's own report; for a record without its class, a vendor that
# makes network adapters only (Mellanox / NVIDIA Networking, AMD Pensando)
_CLASS_OWNER = {"02": "network", "0c06": "network", "01": "node_failure"}
_NIC_VENDORS = frozenset({"15b3", "1dd8"})


def _decode_ghes_pcie(ctx: EngineContext, sym: Symptom, line: Line, ghes: str, device: str, vendor: str,
                      klass: str, driver: str) -> bool:
    """A firmware-first record of a PCIe error (section_type: PCIe error) is the device's AER error, not the host's
    memory: read as kernel.pcie_aer reads the native report, the device's driver saying whose it is, else its PCI
    class (a network or storage controller) or NVIDIA's vendor id."""
    severity = _GHES_AER_SEVERITY.get(ghes, ghes)
    sym.kind, sym.category, sym.strength = "pcie_aer", "gpu_hardware", 70
    sym.fields.update(device=device, severity=severity, section="PCIe error")
    if klass:
        sym.fields["class_code"] = klass
    if driver or vendor == "10de":
        sym.fields["driver"] = driver or "nvidia"
    if vendor:
        sym.fields["vendor_id"] = f"0x{vendor}"
    sym.actions = ("check the PCIe slot, riser and GPU seating; run the vendor's field diagnostics",)
    decode_aer(ctx, sym, line, {})
    owner_class = "" if driver else _CLASS_OWNER.get(klass[:4], _CLASS_OWNER.get(klass[:2], "")) or (
        "network" if vendor in _NIC_VENDORS else "")
    if owner_class == "network":
        sym.category = "network"
        sym.actions = ("check the NIC's slot and cable, its firmware and the port's counters; reseat or replace "
                       "the card",)
    elif owner_class == "node_failure":
        sym.category = "node_failure"
        sym.actions = ("check the node's local disk and its controller (smartctl, nvme smart-log)",)
    owner = sym.fields.get("driver") or (f"class {klass}" if klass else "") or (
        f"vendor 0x{vendor}" if vendor else "no driver named")
    sym.summary = f"pcie aer {severity} error on {device} ({owner}), reported by the firmware (GHES)"[:300]
    return True


def _decode_memory_failure(sym: Symptom) -> bool:
    """mm/memory-failure.c's handling of a poisoned page: a page whose loss harms a process (dirty, huge, a
    failed recovery) or a process it killed is the node's memory failing under the job; a clean or free page
    the kernel dropped (re-read from disk, or nobody's) is context."""
    kind, result = str(sym.fields.get("page_kind", "")), str(sym.fields.get("result", ""))
    killed = sym.fields.get("sigbus") or sym.fields.get("mce_kill") or sym.fields.get("uncorrected")
    if killed:
        sym.summary = f"host memory hardware error on {sym.node}: {killed}"
    elif result == "Failed" or "dirty" in kind or ("huge" in kind and "free" not in kind):
        sym.summary = f"host memory hardware error on {sym.node}: a poisoned {kind} ({result})"
    else:
        sym.role, sym.strength = "context", 0
        sym.summary = f"host memory error on {sym.node}: a poisoned {kind} dropped ({result})"
    return True


@decoder("ib_port_state")
def decode_ib(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A port gone DOWN; whether the same port came back ACTIVE in the lines below (a flap, not a dead link) is
    noted: the rule reads no INIT/ARMED/ACTIVE line of its own."""
    from .families.network import line_end, note_link_back
    port = f"{sym.fields.get('device')}: Port: {sym.fields.get('port')} Link"
    note_link_back(ctx, sym, line, line_end(f"{port} ACTIVE"), line_end(f"{port} DOWN"))
    return True


# Whose device an AER error is, by the driver the kernel names before the device (the rest: the GPU's)
_NIC_DRIVERS = frozenset({"mlx5_core", "mlx4_core", "bnxt_en", "ice", "i40e", "ixgbe", "igb", "e1000e", "tg3",
                          "ena", "qede", "cxgb4", "hfi1", "ionic", "irdma", "efa", "be2net", "nfp"})
_DISK_DRIVERS = frozenset({"nvme", "ahci", "megaraid_sas", "mpt3sas", "smartpqi", "aacraid", "hpsa"})


# what the kernel's AER recovery (drivers/pci/pcie/err.c) prints after the error's report: the outcome on the port
# ('device recovery failed|successful', capitalised before 4.19), or a device driver without AER handlers, whose
# device cannot be recovered (the nvidia driver); and the start of the next error's report, where the search stops
_AER_RECOVERY = re.compile(r"(?i)\bdevice recovery (?P<outcome>failed|successful)|"
                           r"(?P<cant>can't recover \(no error_detected callback\))")
_AER_NEXT_ERROR = re.compile(r"PCIe Bus Error: |error (?:message )?received")


def _same_writer(report: str, text: str) -> bool:
    """Whether ``text`` was written as the AER report was, by the host and tag the stamp parser reads in front of
    each: in a syslog file the kernel's line of the same host (a program's line, 'alice[42]: ... device recovery
    failed', or another host's in a central file is not); in a dmesg capture, a line without a host or tag."""
    mine, other = parse_line_time(report, _HEADER_ONLY), parse_line_time(text, _HEADER_ONLY)
    return (other.tag, other.host) == (mine.tag, mine.host)


_HEADER_ONLY = TimeContext()  # _same_writer compares hosts and tags, never the times


def _aer_recovery(line: Line) -> str:
    """'failed' or 'successful': what the recovery of this AER error came to, from the lines after its report
    written as it was (the kernel's, on the same host)."""
    for text in line.iter_following(12):
        found = _AER_RECOVERY.search(text)
        if found is not None and _same_writer(line.text, text):
            return "failed" if found["cant"] or found["outcome"].lower() == "failed" else "successful"
        if _AER_NEXT_ERROR.search(text):
            break
    return ""


# a kernel line of a device's driver about that device ('nvme 0000:01:00.0: AER: can't recover ...'): dev_printk's
# driver name, lower case ('NVRM: GPU 0000:..:' and the PCI core's 'pci 0000:..:' of a device with no driver bound
# name none)
_DRIVER_OF_DEVICE = re.compile(r"(?:^|\s)(?P<driver>[a-z][a-z0-9_-]{0,63}) (?P<device>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
                               r"[0-9a-fA-F]{2}\.[0-7]): ")
_NOT_A_DRIVER = frozenset({"pci", "pcieport", "iommu", "dmar", "nvrm"})
# the drivers of accelerators the job may run on: their device's error is the job's GPU's
_GPU_DRIVERS = frozenset({"nvidia", "amdgpu", "habanalabs", "xe", "i915", "neuron"})


def _port_report(line: Line, port: str, device: str) -> tuple[bool, str]:
    """What the lines after the port's 'error message received from' line say, written as it was and before the
    next error's report: whether the error's detail follows ('PCIe Bus Error:', printed under the source device's
    or, before 4.x, the port's address), and the source device's driver where one of its lines names it."""
    detail, driver = False, ""
    for text in line.iter_following(12):
        if "PCIe Bus Error: " in text and (device in text or port in text) and "Correct" not in text \
                and _same_writer(line.text, text):
            detail = True  # (an uncorrected error's: a corrected one's detail is another error's)
        elif _AER_NEXT_ERROR.search(text):
            break
        if not driver and device in text and (named := _DRIVER_OF_DEVICE.search(text)) is not None \
                and named["device"].lower() == device and named["driver"] not in _NOT_A_DRIVER \
                and _same_writer(line.text, text):
            driver = named["driver"]
    return detail, driver


def _source_device(port: str, source_id: str) -> str:
    """The device a 3.x port names by its requester id ('id=0010': bus 0x00, device 2, function 0), in the port's
    PCI domain."""
    bus, devfn = int(source_id[:2], 16), int(source_id[2:], 16)
    return f"{port.split(':', 1)[0]}:{bus:02x}:{devfn >> 3:02x}.{devfn & 7}"


@decoder("pcie_aer")
def decode_aer(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Fatal AER on a GPU's port is GPU hardware; non-fatal is weaker; corrected is context. A NIC's or a
    disk controller's error is the network's or the node's instead. The port's line that names where an
    uncorrected error came from is the error only when its detail line does not follow."""
    reporter = sym.fields.get("port")
    if isinstance(reporter, str):
        source_id = sym.fields.pop("source_id", None)
        if isinstance(source_id, str):
            sym.fields["device"] = _source_device(reporter, source_id)
        port = reporter.lower()
        source = str(sym.fields.get("device") or port).lower()
        detail, driver = _port_report(line, port, source)
        if detail:
            sym.role, sym.strength = "context", 0
            sym.notes.append("the error's detail line follows the port's report: that line is the error")
            return True
        sym.notes.append(f"the port {port} reported the error without its detail (the device could not be read)")
        if driver:
            sym.fields["driver"] = driver  # the device's driver, from its own line after the report
            if driver not in _GPU_DRIVERS and driver not in _NIC_DRIVERS:
                # a disk's driver reports its device's failure in its own words (nvme), which its rules read; another
                # device's (Bluetooth, a sound card) is none of the job's; a GPU's or a NIC's is read below
                sym.role, sym.strength = "context", 0
                sym.notes.append(f"the device is {driver}'s, neither a GPU nor a NIC: its driver's own lines speak "
                                 "for it")
                return True
    severity = str(sym.fields.get("severity", ""))
    driver = str(sym.fields.get("driver", ""))
    if driver in _NIC_DRIVERS:
        sym.category = "network"
        sym.actions = ("check the NIC's slot and cable, its firmware and the port's counters; reseat or replace "
                       "the card",)
    elif driver in _DISK_DRIVERS:
        sym.category = "node_failure"
        sym.actions = ("check the node's local disk and its controller (smartctl, nvme smart-log)",)
    if severity.startswith("Correct"):  # Corrected (older kernels) / Correctable (newer)
        sym.role, sym.strength = "context", 0
    elif "Non-Fatal" in severity:
        sym.strength = 40
    if not severity.startswith("Correct") and (recovery := _aer_recovery(line)):
        sym.fields["recovery"] = recovery
        if recovery == "failed":
            sym.strength = max(sym.strength, 70)  # the device is left failed: as strong as a fatal error
    facts = ctx.bundle.facts_for(sym.node)
    device = sym.fields.get("device")
    if isinstance(device, str):
        pci = normalise_pci(device)
        if facts and facts.uuid_for(pci) is not None:
            sym.gpu = pci
    return True


@decoder("iommu_fault")
def decode_iommu_fault(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """An IOMMU fault is the node's platform when the device is one of the job's GPUs (the node's facts list it,
    or its driver is nvidia) and the RDMA path's when a NIC's driver printed it; another device's is context."""
    fields = sym.fields
    device = str(fields.get("device") or "")
    if not device and fields.get("bus") is not None:
        device = f"{fields['bus']}:{fields['slot']}.{fields['function']}"
    if device.count(":") == 1:
        device = "0000:" + device  # the kernel prints a device of PCI domain 0 without it
    fields["device"] = device.lower()
    pci = normalise_pci(device) if device else ""
    facts = ctx.bundle.facts_for(sym.node)
    driver = str(fields.get("driver", ""))
    if pci and facts and facts.uuid_for(pci) is not None:
        sym.gpu = pci
    elif driver in _NIC_DRIVERS:
        sym.category = "network"
    elif driver != "nvidia":
        sym.role, sym.strength = "context", 0  # a device the job does not use, as far as the bundle says
        sym.notes.append("the IOMMU fault is not of a GPU in the node's facts nor of a NIC: another device's")
        return True
    sym.notes.append("the IOMMU refused the device's DMA: peer-to-peer or GPUDirect traffic through an IOMMU in "
                     "translation mode (the node's iommu= and ACS settings)")
    return True


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@decoder("dcgm_sample")
def decode_dcgm(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A dcgm-exporter sample: keep non-zero values, identify the GPU from its labels."""
    try:
        value = float(str(sym.fields.get("value", "0")))
    except ValueError:
        return False
    if value <= 0 or value >= 9.2e18:  # zero, or DCGM's 'blank' sentinel for unsupported fields
        return False
    labels = dict(_LABEL.findall(str(sym.fields.pop("labels", ""))))
    sym.fields["value"] = int(value) if value.is_integer() else value
    if labels.get("pci_bus_id"):
        try:
            sym.gpu = normalise_pci(labels["pci_bus_id"])
            sym.fields["pci"] = sym.gpu
        except ValueError:
            pass
    for key in ("UUID", "uuid"):
        if labels.get(key):
            sym.fields["uuid"] = labels[key]
    host = labels.get("hostname") or labels.get("Hostname")
    if host and sym.node is None:
        sym.node = match_node(ctx.job.node_set, host)
    return True


_DESYNC_RANK = re.compile(r"^\s*\[(\d+(?:, \d+)*)\] (?:finished|joined|did not|didn't|started|never)")


@decoder("desync_report")
def decode_desync(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Collect the ranks listed under 'the lagging/dead/mismatched ranks that caused the desync are:'."""
    ranks: list[int] = []
    for text in line.following(20):
        match = _DESYNC_RANK.match(split_rank(text)[1])
        if not match:
            break
        ranks.extend(int(r) for r in match.group(1).split(", "))
    if not ranks:
        return False
    sym.fields["lagging_ranks"] = sorted(set(ranks))
    nodes = sorted({n for n in (ctx.job.rank_node(r) for r in ranks) if n})
    if nodes:
        sym.fields["lagging_nodes"] = nodes
    return True


# Horovod before 0.20: "<tensor> [missing ranks: 0, 1]"; since: "Missing ranks:" / "Stalled ranks:", then "3: [...]"
_STALL_OP_RANKS = re.compile(r"\[missing ranks: ?([\d, ]{1,4000})\]")
_STALL_RANK_ROW = re.compile(r"^\s*(\d{1,7})!?: \[")
_STALL_ROW = re.compile(r"Horovod\w{1,40}_\S{1,300} \[(?:missing|ready) ranks: ")


@decoder("collective_stall")
def decode_collective_stall(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Horovod's (and BlueFog's) stall report lists the ranks that have not submitted the stalled tensors,
    on the lines after it: they are where to look (``lagging_nodes``), not a verdict. A paste that cut the report's
    header keeps its rows: the first row of a block stands for it."""
    ranks: set[int] = set()
    which = sym.fields.pop("which", None)
    if which is not None:
        # a tensor's row read without the report's header (a paste that cut it): the first row of its block stands
        # for the report; a row under the header or another row is the report's
        previous = next(iter(line.preceding(1)), "")
        if _STALL_ROW.search(split_rank(previous)[1]) or "waiting for remainder of ranks" in previous:
            return False
        if which == "ready":  # before Horovod 0.14 the row listed the ranks that had submitted it (#342)
            sym.fields["ready_ranks"] = sorted(int(r) for r in re.findall(r"\d+", line.text.rsplit("[", 1)[-1]))
    for text in [line.text, *line.following(40)] if which == "missing" else line.following(40):
        prefix, body = split_rank(text)
        found = _STALL_OP_RANKS.search(body)
        row = _STALL_RANK_ROW.match(body)
        if found:
            ranks.update(int(r) for r in re.findall(r"\d+", found.group(1)))
        elif row:
            ranks.add(int(row.group(1)))
        elif prefix is not None and prefix[0] is not None and prefix[1:] == (None, None) and body.startswith("["):
            ranks.add(prefix[0])  # "3: [tensors]" reads like srun's label: the row's rank, taken as one
        elif body.strip() not in ("", "Stalled ops:", "Missing ranks:", "Stalled ranks:"):
            break
    if ranks:
        sym.fields["lagging_ranks"] = sorted(ranks)
        nodes = sorted({n for n in (ctx.job.rank_node(r) for r in ranks) if n})
        if nodes:
            sym.fields["lagging_nodes"] = nodes
    return True


@decoder("storage_or_data")
def decode_storage_or_data(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A library that could not read or write its file format (netCDF's 'NetCDF: HDF error') cannot say whether
    the file system failed under it or the file and the program's use of it are wrong: both readings."""
    sym.fields["readings"] = ["storage", "application"]
    return True
