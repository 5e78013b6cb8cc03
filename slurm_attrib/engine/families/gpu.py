"""GPU errors as applications, NCCL, NVML and GPU diagnostic tools report them.

One catalog of CUDA errors (runtime ``cudaError*`` names, driver ``CUDA_ERROR_*`` names, their
numbers and ``cudaGetErrorString`` texts) decides what a CUDA error says about its cause: the GPU's
memory (uncorrectable ECC), its NVLinks, the NVSwitch fabric (802, the Fabric Manager has not
brought the fabric up), GPU memory exhaustion (the workload's), or a kernel bug. Errors that could
be either a GPU fault or a kernel bug ('unspecified launch failure', 'unknown error') name no cause
on their own: they stay context until a kernel Xid or a diagnostic explains them.

References:
  https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html
  https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html
  https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html
  https://github.com/NVIDIA/nccl/blob/5067397c2676d5aed50042fc39e5c8ee96eb0027/src/include/checks.h
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from ...bundle import NodeFacts
from ...model import SOURCE_APP, Symptom
from ...nvidia.assess import assess_xid
from ...nvidia.parse import XidEvent, normalise_pci
from ...ruleset import Rule
from ...scan import Line
from ..context import EngineContext
from ..params import str_list
from ..ranks import split_rank
from ..registry import decoder, rule


@dataclass(frozen=True)
class Verdict:
    """What an error says about its cause: role, category, responsible, strength."""

    role: str
    category: str
    responsible: str
    strength: int
    note: str = ""
    readings: tuple[str, ...] = ()  # categories the line fits alike: alone, an ambiguous verdict with each


GPU_MEMORY = Verdict("candidate", "gpu_memory", "infrastructure", 75)
# An NVLink error only the application saw: the node is named only by its kernel log (Xid 74, 144-150),
# which then leads; killed peers mid-transfer raise it too (pytorch/pytorch #58155, on two A100 sites and
# only in the tests that abort ranks): alone, both readings
NVLINK_APP = Verdict("candidate", "unknown", "unknown", 40,
                     "an NVLink error seen by the application: check the node's kernel log for Xid 74 / 144-150 and "
                     "nvidia-smi nvlink -e before draining; peers killed mid-transfer raise it too",
                     readings=("nvlink", "application"))
# CUDA's error containment stopped a kernel (cudaErrorContained, 226): 'certain invalid accesses of peer GPU
# memory over nvlink' or 'certain classes of hardware errors', in CUDA's own words; on PCIe boards without
# NVLink it is the GPU's memory (an uncontained HBM error the driver contained: Xid 94, rows remapped). An
# invalid peer access is also the program's (a pointer into a peer's memory it may not touch: NVIDIA's catalog
# says to debug the application for the illegal peer-to-peer access Xid). The kernel log's Xid decides; alone,
# all three readings
CONTAINED = Verdict("candidate", "unknown", "unknown", 40,
                    "a fault the GPU contained: an uncorrectable memory error (Xid 94/95/48/63/64), a failing "
                    "NVLink (Xid 74/144-150) or the program's invalid access of a peer's memory; the node's kernel "
                    "log and nvidia-smi -q (remapped rows) tell", readings=("gpu_memory", "nvlink", "application"))
FABRIC = Verdict("candidate", "nvlink", "infrastructure", 70,
                 "802 'system not yet initialized': the NVSwitch fabric is not up (nvidia-fabricmanager / NVLSM)")
# 'all CUDA-capable devices are busy or unavailable' (46): the GPU in an exclusive compute mode another process
# holds (a job layout that puts two ranks on one GPU; a process an earlier job left behind, which the node's
# cleanup should have reaped, or another tenant the node's GPU isolation let in), or one that needs a reset; a
# kernel Xid or the driver's reset-required line decides for the hardware, alone all three readings, no node named
GPU_UNAVAILABLE = Verdict("candidate", "unknown", "unknown", 45,
                          "the GPU is held by another process (exclusive compute mode: two ranks on one GPU, a "
                          "process an earlier job left behind, another job) or needs a reset; the node's kernel "
                          "log and nvidia-smi (its processes, memory in use) tell",
                          readings=("gpu_hardware", "node_failure", "application"))
DRIVER_MISMATCH = Verdict("candidate", "node_failure", "unknown", 45,
                          "the node's driver and the CUDA libraries disagree (a container's own CUDA forward-"
                          "compatibility libraries on a driver they do not support, or a driver updated without "
                          "reload)")
GPU_OOM = Verdict("candidate", "gpu_oom", "workload", 60)
DEVICE_ASSERT = Verdict("candidate", "application", "workload", 55)
KERNEL_BUG = Verdict("candidate", "application", "workload", 45)
ENVIRONMENT = Verdict("candidate", "application", "workload", 40)
# An illegal instruction (715) is a compiler's or a hand-written kernel's bug as often as a GPU's fault: threads
# that saw it at random on identical runs ended with a board swap, a lower power limit or a library change
# alike, and the kernel's Xid 13/31 beside it is what tells. Alone, both readings, no node named.
ILLEGAL_INSTRUCTION = Verdict("candidate", "unknown", "unknown", 40,
                              "an illegal instruction on the GPU: a compiler or kernel bug, or a failing GPU; the "
                              "node's kernel log (Xid 13/31) and the same run elsewhere tell",
                              readings=("gpu_hardware", "application"))
# A candidate only until refine.gpu_indeterminate_cuda_error: a hardware fault may claim it first
INDETERMINATE = Verdict("candidate", "unknown", "unknown", 30,
                        "a GPU fault or a kernel bug: only a kernel log (Xid 13/31/43/79) or a GPU diagnostic tells")
# A kernel the GPU's watchdog stopped (702): most often a display on the compute GPU (an X server: its watchdog
# ends kernels that run for seconds; deviceQuery 'Run time limit on kernels: Yes', nvidia-smi 'Disp.A On'), else
# a GPU that hung (Xid 8, 'RC watchdog: GPU is probably locked') or a kernel that never ends; undecided as above
LAUNCH_TIMEOUT = Verdict("candidate", "unknown", "unknown", 30,
                         "a kernel stopped by the GPU's watchdog: a display (X server) on the compute GPU limits "
                         "kernel run time (nvidia-smi 'Disp.A On', deviceQuery 'Run time limit on kernels: Yes'); "
                         "else a hung GPU (Xid 8) or a kernel that never ends")
# The process sees no GPU at all: the node's driver or devices (a kernel updated without a reboot, a GPU
# gone), or the job's request (a step launched without its GPUs, CUDA_VISIBLE_DEVICES emptied): both readings
NO_DEVICE = Verdict("candidate", "unknown", "unknown", 30,
                    "no GPU visible to the process: the node's driver or devices, or the job's GPU request "
                    "(a step launched without --gpus, CUDA_VISIBLE_DEVICES)")
TEARDOWN = Verdict("teardown", "unknown", "unknown", 0, "the CUDA context was already going away")
# the driver's own user-space library (libcuda, NVML) missing for the process: the node's driver, or the job's
# container or placement (app.gpu_driver_library_missing)
DRIVER_LIBRARY_MISSING = Verdict("candidate", "unknown", "unknown", 40,
                                 "the NVIDIA driver's library is not visible to the process: the node's driver not "
                                 "installed or loaded, a container without the NVIDIA runtime, or a node without GPUs",
                                 readings=("node_failure", "application"))
# the job's build or image wants a newer driver than the node has: the job's choice of image, or a node left
# behind the cluster's driver (one node of many on an older driver); either reading
DRIVER_TOO_OLD = Verdict("candidate", "unknown", "unknown", 40,
                         "the job's CUDA build or container wants a newer driver than the node has: the job's image "
                         "(pick one built for the cluster's driver) or a node left on an older driver",
                         readings=("application", "node_failure"))


@dataclass(frozen=True)
class CudaError:
    """One CUDA error: runtime name, driver name, numbers that mean only it, its message."""

    name: str
    driver: str
    codes: tuple[int, ...]
    text: str
    verdict: Verdict


# Numbers: CUDA >= 10 runtime and driver codes agree for the ones listed; 39 is cudaErrorECCUncorrectable
# of CUDA <= 9 (unused since). Small numbers that changed meaning across versions are left out.
CUDA_ERRORS: tuple[CudaError, ...] = (
    CudaError("cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", (214, 39),
              "uncorrectable ECC error encountered", GPU_MEMORY),
    CudaError("cudaErrorNvlinkUncorrectable", "CUDA_ERROR_NVLINK_UNCORRECTABLE", (220,),
              "uncorrectable NVLink error", NVLINK_APP),
    CudaError("cudaErrorContained", "CUDA_ERROR_CONTAINED", (226,),
              "Invalid access of peer GPU memory over nvlink or a hardware error", CONTAINED),
    CudaError("cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY", (802,), "system not yet initialized", FABRIC),
    CudaError("cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", (803,),
              "system has unsupported display driver / cuda driver combination", DRIVER_MISMATCH),
    CudaError("cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", (804,),
              "forward compatibility was attempted on non supported HW", DRIVER_MISMATCH),
    CudaError("cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE", (46,),
              "busy or unavailable", GPU_UNAVAILABLE),
    CudaError("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", (2,), "out of memory", GPU_OOM),
    CudaError("cudaErrorAssert", "CUDA_ERROR_ASSERT", (710,), "device-side assert", DEVICE_ASSERT),
    CudaError("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", (700,), "illegal memory access", KERNEL_BUG),
    CudaError("cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", (701,),
              "too many resources requested for launch", KERNEL_BUG),
    CudaError("cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION", (715,), "illegal instruction",
              ILLEGAL_INSTRUCTION),
    CudaError("cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", (716,), "misaligned address", KERNEL_BUG),
    CudaError("cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE", (717,),
              "operation not supported on global/shared address space", KERNEL_BUG),
    CudaError("cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", (718,), "invalid program counter", KERNEL_BUG),
    CudaError("cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU", (209,),
              "no kernel image is available for execution on the device", ENVIRONMENT),
    CudaError("cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", (222,),
              "the provided PTX was compiled with an unsupported toolchain", ENVIRONMENT),
    # the program's GPU code and what loads it disagree (a module built without this symbol or this GPU's code,
    # a JIT compiler library missing from the container): the job's build, not the GPU
    CudaError("cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND", (500,), "named symbol not found", ENVIRONMENT),
    CudaError("cudaErrorInvalidDeviceFunction", "", (98,), "invalid device function", ENVIRONMENT),
    CudaError("cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE", (200,), "device kernel image is invalid",
              ENVIRONMENT),
    CudaError("cudaErrorJitCompilerNotFound", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", (221,),
              "PTX JIT compiler library not found", ENVIRONMENT),
    CudaError("cudaErrorSharedObjectSymbolNotFound", "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", (302,),
              "shared object symbol not found", ENVIRONMENT),
    CudaError("cudaErrorInsufficientDriver", "", (35,),
              "CUDA driver version is insufficient for CUDA runtime version", ENVIRONMENT),
    CudaError("cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE", (101,), "invalid device ordinal", ENVIRONMENT),
    # what CUDA graph capture refuses (cudaStreamBeginCapture to EndCapture): a call the program made inside a
    # capture that capture does not allow, or a capture it began and ended wrongly: its code or its framework's
    CudaError("cudaErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", (900,),
              "operation not permitted when stream is capturing", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", (901,),
              "operation failed due to a previous error during capture", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureMerge", "CUDA_ERROR_STREAM_CAPTURE_MERGE", (902,),
              "operation would result in a merge of separate capture sequences", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureUnmatched", "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", (903,),
              "capture was not ended in the same stream as it began", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureUnjoined", "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", (904,),
              "capturing stream has unjoined work", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureIsolation", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", (905,),
              "dependency created on uncaptured work in another stream", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureImplicit", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", (906,),
              "operation would make the legacy stream depend on a capturing blocking stream", KERNEL_BUG),
    CudaError("cudaErrorCapturedEvent", "CUDA_ERROR_CAPTURED_EVENT", (907,),
              "operation not permitted on an event last recorded in a capturing stream", KERNEL_BUG),
    CudaError("cudaErrorStreamCaptureWrongThread", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", (908,),
              "attempt to terminate a thread-local capture sequence from another thread", KERNEL_BUG),
    # a call the program made wrongly, or one this setup does not allow (IPC handles of stream-ordered
    # allocations, fabric handles without an IMEX channel): the job's code or its build
    CudaError("cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE", (1,), "invalid argument", ENVIRONMENT),
    CudaError("cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE", (400,), "invalid resource handle",
              ENVIRONMENT),
    CudaError("cudaErrorNotPermitted", "CUDA_ERROR_NOT_PERMITTED", (800,), "operation not permitted", ENVIRONMENT),
    CudaError("cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED", (801,), "operation not supported", ENVIRONMENT),
    CudaError("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", (719,), "unspecified launch failure",
              INDETERMINATE),
    CudaError("cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT", (702,), "the launch timed out", LAUNCH_TIMEOUT),
    CudaError("cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", (714,), "hardware stack error",
              INDETERMINATE),
    CudaError("cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED", (3,), "initialization error",
              INDETERMINATE),
    # 100 since CUDA 10 (38 before, a number reused since: the text finds the old runtime's message)
    CudaError("cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", (100,), "no CUDA-capable device is detected", NO_DEVICE),
    CudaError("cudaErrorUnknown", "CUDA_ERROR_UNKNOWN", (999,), "unknown error", INDETERMINATE),
    CudaError("cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED", (), "driver shutting down", TEARDOWN),
    CudaError("cudaErrorContextIsDestroyed", "CUDA_ERROR_CONTEXT_IS_DESTROYED", (709,), "context is destroyed",
              TEARDOWN),
)

# cuBLAS / cuDNN / cuSOLVER / cuSPARSE / cuFFT allocation failures: the library could not get GPU memory.
ALLOC_FAILED = re.compile(r"\bCU(?:BLAS|DNN|SOLVER|SPARSE|RAND)_STATUS_ALLOC_FAILED\b|\bCUFFT_ALLOC_FAILED\b")
# cuBLAS's and cuDNN's 'the GPU program failed to execute' (CUBLAS_STATUS_EXECUTION_FAILED 13, CUDNN_STATUS_EXECUTION_
# FAILED 8): a kernel that did not run, for a fault of the GPU or an error an earlier kernel left, as an 'unspecified
# launch failure' is; undecided until the kernel log or a diagnostic says (a library bug, pytorch#24018; a card,
# pytorch#40420), or a memory shortage in disguise: the fastest algorithm's workspace that did not fit (caffe#2197,
# pytorch#17774, where NVIDIA's engineers call it 'OOM in disguise'). Their other statuses (NOT_SUPPORTED,
# INVALID_VALUE, INTERNAL_ERROR) are the job's environment.
EXECUTION_FAILED = re.compile(r"\bCU(?:BLAS|DNN)_STATUS_EXECUTION_FAILED\b")
LIBRARY_EXECUTION_FAILED = Verdict("candidate", "unknown", "unknown", 30,
                                   "a cuBLAS/cuDNN kernel that did not run: a GPU fault, an error an earlier kernel "
                                   "left, or GPU memory too short for the algorithm's workspace; the kernel log (Xid "
                                   "13/31/43/79) and the run with a smaller batch or cudnn.benchmark off tell",
                                   readings=("gpu_hardware", "application", "gpu_oom"))
_NAME = re.compile(r"\b(?:cudaError\w+|hipError\w+|CUDA_ERROR_[A-Z_]+|(?<![A-Z_])ERROR_[A-Z_]+)")
# 'code=802(', '(code #214,', 'error code 214', 'Error 802: ', 'Cuda failure 802 ', 'runtime error (802)',
# glog's 'cudaSuccess == cudaStat (0 vs. 39)', numba's '[719] Call to', geryon's (LAMMPS GPU package) 'Cuda driver error
# 804 in call at file', torch_memory_saver's 'CUresult error  result=2 file=' and 'CUresult error: 2 (out of memory)'
_CODE = re.compile(r"(?i)(?:\bcode=|(?:curesult|cudaerror|hiperror_t) error(?::\s*|\s+result=)|\(code\s*#?|"
                   r"error code:?\s*|\berror\s+(?=\d+:)|cuda failure\s+|"
                   r"cuda driver error\s+(?=\d+ in call)|"
                   r"runtime error \(|cudaSuccess == \w+ \(0 vs\.\s*|\[(?=\d+\] Call to))(?P<code>\d{1,3})\b")
_BY_NAME = {e.name.lower(): e for e in CUDA_ERRORS} | {e.driver.lower(): e for e in CUDA_ERRORS if e.driver} \
    | {e.driver.lower()[5:]: e for e in CUDA_ERRORS if e.driver}  # 'ERROR_ECC_UNCORRECTABLE' (Julia)
# ROCm's HIP keeps CUDA's runtime names under its own prefix (hipErrorIllegalAddress), except where it
# renamed them; its numbers differ, so a HIP error is read by name and text only
_HIP_NAMES = {"hipErrorOutOfMemory": "cudaErrorMemoryAllocation",
              "hipErrorNoBinaryForGpu": "cudaErrorNoKernelImageForDevice",
              "hipErrorECCNotCorrectable": "cudaErrorECCUncorrectable",
              "hipErrorNotInitialized": "cudaErrorInitializationError",
              "hipErrorDeinitialized": "cudaErrorCudartUnloading"}
_BY_NAME |= {"hip" + e.name.lower()[4:]: e for e in CUDA_ERRORS} | {
    hip.lower(): _BY_NAME[cuda.lower()] for hip, cuda in _HIP_NAMES.items()}
_BY_CODE = {code: e for e in CUDA_ERRORS for code in e.codes}


def classify_cuda(text: str) -> Optional[CudaError]:
    """The CUDA error a message names: by enum name, else by its message text, else by its number."""
    for match in _NAME.finditer(text):
        found = _BY_NAME.get(match.group(0).lower())
        if found is not None:
            return found
    lowered = text.lower().replace("rocm-capable", "cuda-capable")  # HIP's hipErrorNoDevice text
    for error in CUDA_ERRORS:
        if error.text.lower() in lowered:
            return error
    for match in _CODE.finditer(text):
        found = _BY_CODE.get(int(match.group("code")))
        if found is not None:
            return found
    return None


def apply_verdict(sym: Symptom, verdict: Verdict, summary: str = "") -> None:
    sym.role, sym.category, sym.responsible, sym.strength = (verdict.role, verdict.category, verdict.responsible,
                                                             verdict.strength)
    if verdict.note:
        sym.notes.append(verdict.note)
    if verdict.readings:
        sym.fields["readings"] = list(verdict.readings)
    if summary:
        sym.summary = summary[:300]
    if verdict is INDETERMINATE or verdict is NO_DEVICE or verdict is LAUNCH_TIMEOUT:
        sym.fields["indeterminate"] = True
    if verdict.category == "gpu_oom" and sym.kind == "cuda_error":
        sym.kind = "cuda_oom"


# a check macro's own expression before the error it reports (TVM's CUDA_CALL: 'Check failed: (e == cudaSuccess || e
# == cudaErrorCudartUnloading) is false: CUDA: <the error>'): code, not the error
_CHECK_EXPRESSION = re.compile(r"Check failed: \([^)\n]{0,200}\) is false: ")


def classify_line(sym: Symptom, text: str) -> bool:
    """Set the symptom's verdict from the CUDA error its line names; False when it names none known."""
    text = _CHECK_EXPRESSION.sub("", text)
    if ALLOC_FAILED.search(text):
        apply_verdict(sym, GPU_OOM)
        sym.fields.setdefault("cuda_error", ALLOC_FAILED.search(text).group(0))  # type: ignore[union-attr]
        return True
    failed = EXECUTION_FAILED.search(text)
    if failed is not None:
        apply_verdict(sym, LIBRARY_EXECUTION_FAILED)
        sym.fields.setdefault("cuda_error", failed.group(0))
        return True
    error = classify_cuda(text)
    if error is None:
        return False
    apply_verdict(sym, error.verdict)
    sym.fields.setdefault("cuda_error", error.name)
    return True


@decoder("gpu_cuda_status")
def decode_cuda_status(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A CUDA error named by enum, by number or by its message in any framework's wording. cuInit takes no
    argument a program could get wrong: its 'invalid value' is the driver's state, which the lines around it
    (a driver/library mismatch) say; it decides nothing by itself."""
    if not classify_line(sym, extra["text"]):
        return False
    if "cuInit" in extra["text"] and sym.fields.get("cuda_error") in _CALL_ERRORS:
        sym.role, sym.category, sym.responsible, sym.strength = "context", "unknown", "unknown", 0
    else:
        fabric_memory_call(ctx, sym, extra["text"], line)
    sym.summary = f"{sym.fields['cuda_error']} on rank {'?' if sym.rank is None else sym.rank}: " \
                  f"{str(sym.fields.get('error') or sym.fields.get('name') or '').strip()}"[:300]
    return True


# A rendezvous of PyTorch's symmetric memory (torch.distributed._symmetric_memory; vLLM's and SGLang's all-reduce
# over it) maps CUDA multicast objects: an 802 raised there, by a process that had used its GPUs until then (a
# Fabric Manager that was not up fails cuInit itself), is the multicast part of the fabric (IMEX, an NVLink
# partition without multicast) or the job asking for a feature this platform does not give; the frames just above
# the error say where it was raised.
_SYMMETRIC_MEMORY = re.compile(r"_symmetric_memory|[Ss]ymm_?[Mm]em|SymmetricMemory|cuMulticast")
_SYMMETRIC_MEMORY_LINES = 12
SYMMETRIC_MEMORY_802 = Verdict("candidate", "unknown", "unknown", 50,
                               "802 during a symmetric-memory rendezvous (CUDA multicast objects): the fabric's "
                               "multicast (IMEX, Fabric Manager partition) or a feature the job asked of a platform "
                               "that lacks it; turning the symmetric-memory all-reduce off avoids it",
                               readings=("nvlink", "application"))


# CUDA's fabric memory (VMM allocations with a fabric handle, multicast objects) is mapped across the nodes of a
# multi-node NVLink domain through the IMEX daemons and the NVLink fabric: a call of it refused across nodes ('invalid
# argument' from cuMemSetAccess, 'invalid resource handle' from cuMemImportFromShareableHandle) is the domain's setup
# (IMEX channels, an NVLink partition) as often as the program's handles and flags; a one-node job's is the program's
_FABRIC_MEMORY_CALL = re.compile(r"\bcu(?:MemSetAccess|MemImportFromShareableHandle|MemExportToShareableHandle|"
                                 r"MemCreate|MemMap|Multicast[A-Z]\w{0,40})\b")
_ACROSS_NODES = re.compile(r"(?i)multi-?node|fabric|imex")
FABRIC_MEMORY = Verdict("candidate", "unknown", "unknown", 45,
                        "a fabric-memory call (CUDA VMM across the nodes of an NVLink domain) was refused: the "
                        "domain's IMEX daemons and channels or NVLink partition, or the program's handles and flags",
                        readings=("nvlink", "application"))


def fabric_memory_call(ctx: EngineContext, sym: Symptom, text: str, line: Line) -> None:
    """A call error (invalid value or handle, not permitted or supported) of a fabric-memory call in a job across
    nodes, or one the line says is across nodes: both readings, no node (see FABRIC_MEMORY); an 802 raised in a
    symmetric-memory rendezvous: both readings too (see SYMMETRIC_MEMORY_802)."""
    error = sym.fields.get("cuda_error")
    if error in _CALL_ERRORS and _FABRIC_MEMORY_CALL.search(text) \
            and (len(ctx.job.nodes) > 1 or _ACROSS_NODES.search(text)):
        apply_verdict(sym, FABRIC_MEMORY)
    elif error == "cudaErrorSystemNotReady" and sym.category == FABRIC.category \
            and any(map(_SYMMETRIC_MEMORY.search, line.preceding(_SYMMETRIC_MEMORY_LINES))):
        apply_verdict(sym, SYMMETRIC_MEMORY_802)


# --- a SYCL runtime's word for its backend's error ------------------------------------------------

# HIP numbers its errors as CUDA's runtime does below 1000 (hip_runtime_api.h: hipErrorInvalidValue = 1,
# hipErrorOutOfMemory = 2, hipErrorIllegalAddress = 700); HIP before ROCm 1.9 counted from 1001, past these.
_MIRRORED_BACKENDS = frozenset({"cuda", "hip"})


@decoder("gpu_sycl_backend")
def decode_sycl_backend(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """AdaptiveCpp (hipSYCL) prints a backend call's failure with the backend and its number: 'cudaMalloc()
    failed (error code = CUDA:2)', 'hipMemsetAsync() failed (error code = HIP:1)'. A CUDA or HIP number that
    means one error only reads as that error; a Level Zero or OpenCL number, or one this catalog leaves out,
    says nothing by itself."""
    code = sym.fields.get("code")
    backend = str(sym.fields.get("backend", "")).lower()
    error = _BY_CODE.get(code) if isinstance(code, int) and backend in _MIRRORED_BACKENDS and 0 < code < 1000 \
        else None
    if error is None:
        return False
    apply_verdict(sym, error.verdict)
    sym.fields["cuda_error"] = error.name
    sym.summary = f"{error.name} on rank {'?' if sym.rank is None else sym.rank}: " \
                  f"{str(sym.fields.get('call') or '').strip()} ({backend.upper()}:{code})"[:300]
    return True


# --- NCCL's 'Cuda failure' ------------------------------------------------------------------------

NVLS_STATE = Verdict("candidate", "nvlink", "infrastructure", 55,
                     "NVLS multicast refused in the present state: the node's NVSwitch fabric / Fabric Manager state")
NVLS_UNKNOWN = Verdict("candidate", "unknown", "unknown", 50,
                       "NVLink SHARP (NVLS) setup failed: a Fabric Manager restarted without a GPU reset, a container "
                       "without /dev/nvidia-caps, multicast resources exhausted, or a CUDA runtime newer than the "
                       "driver; NCCL_NVLS_ENABLE=0 avoids it", readings=("nvlink", "application"))


# the errors of a call made wrongly or not allowed here: the program's when it made the call, not when NCCL did
_CALL_ERRORS = frozenset({"cudaErrorInvalidValue", "cudaErrorInvalidResourceHandle", "cudaErrorNotPermitted",
                          "cudaErrorNotSupported"})


@decoder("gpu_nccl_cuda_failure")
def decode_nccl_cuda(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """NCCL's CUDACHECK/CUCHECK ('Cuda failure [N] 'text''), nccl-tests' 'Test CUDA failure file:line'.
    In the NVLS transport the failure is the NVLink SHARP fabric's (category nvlink)."""
    text = extra["text"]
    if not sym.fields.get("error"):
        following = line.following(1)
        # the quoted text on the next line carries the same rank prefix ("3: 'unspecified launch failure'")
        quoted = re.match(r"\s*'([^']+)'", split_rank(following[0])[1]) if following else None
        if quoted:
            sym.fields["error"] = quoted.group(1)
            text = f"{text} '{quoted.group(1)}'"
    error = classify_cuda(text)
    if "nvls" in text.lower() and _NVLS_REFUSAL.search(text) and (error is None or error.verdict is not FABRIC):
        apply_verdict(sym, NVLS_STATE if 401 in _codes(text) else NVLS_UNKNOWN)
    elif error is None or error.name in _CALL_ERRORS:
        # a call NCCL made itself that CUDA refused ('invalid argument' in its NVLS or P2P setup): not the
        # job's code, and the line does not say whose setup it was
        sym.role, sym.category, sym.responsible, sym.strength = "context", "unknown", "unknown", 0
    else:
        apply_verdict(sym, error.verdict)
    if error is not None:
        sym.fields["cuda_error"] = error.name
    sym.summary = f"nccl cuda failure on {sym.node or '?'}: {sym.fields.get('error', '?')}"
    return True


# What the multicast calls (cuMulticastCreate / AddDevice / BindMem) return when the fabric or the
# process's access to it refuses: invalid argument/value, out of memory (slots), not permitted /
# supported, illegal state; and 'unknown error' (999), which NCCL's maintainers see there after a Fabric
# Manager restart without a GPU reset (NVIDIA/nccl-tests#276, nccl#976). Anything else in nvls.cc (e.g.
# 'initialization error') is CUDA itself failing.
_NVLS_REFUSAL = re.compile(r"(?i)invalid (?:argument|value)|out of memory|not permitted|not supported|present state|"
                           r"unknown error|failure (?:1|2|401|800|801|999)\b")


def _codes(text: str) -> set[int]:
    return {int(m.group("code")) for m in _CODE.finditer(text)}


_BIND_ERROR = re.compile(r"CUDA error (\d{1,3})\b")


@decoder("gpu_nvls_bind")
def decode_nvls_bind(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """'Failed to bind NVLink SHARP (NVLS) Multicast memory ... CUDA error N': whose fault depends on the
    error: 802, the fabric is not up, and 401, the operation refused in the present state (a Fabric Manager
    or NVSwitch state to reset), are the node's; any other fits the fabric and the software stack alike."""
    text = extra["text"]
    if sym.fields.get("code") is None:  # a terminal wrapped the size and the error onto the next line
        text = " ".join([text, *line.following(1)])
        wrapped = _BIND_ERROR.search(text)
        if wrapped:
            sym.fields["code"] = int(wrapped.group(1))
    error = classify_cuda(text)
    if error is not None and error.verdict is FABRIC:
        apply_verdict(sym, FABRIC)
    elif sym.fields.get("code") == 401 or "present state" in text:
        apply_verdict(sym, NVLS_STATE)  # CUDA_ERROR_ILLEGAL_STATE: the node's fabric / Fabric Manager state
    else:
        apply_verdict(sym, NVLS_UNKNOWN)
    return True


# --- NVML and nvidia-smi ----------------------------------------------------------------------------

GPU_LOST = Verdict("candidate", "gpu_hardware", "infrastructure", 65, "NVML lost the GPU: it fell off the bus or "
                                                                       "hung; only a reset or reboot recovers it")
GPU_NO_HANDLE = Verdict("candidate", "gpu_hardware", "infrastructure", 60,
                        "NVML cannot reach the GPU (nvidia-smi 'Unable to determine the device handle')")
GPU_RESET = Verdict("candidate", "gpu_hardware", "infrastructure", 60, "the GPU needs a reset")
NO_DEVICES = Verdict("candidate", "gpu_hardware", "unknown", 45,
                     "NVML sees no GPU: driver not loaded or every GPU gone")
# NVML_ERROR_LIB_RM_VERSION_MISMATCH (18): the loaded kernel module is not the version of the node's
# libnvidia-ml (a container's too: the runtime mounts the host's), i.e. the driver packages were updated
# under a loaded module; NVML_ERROR_DRIVER_NOT_LOADED (9) and nvidia-smi's "couldn't communicate with the
# NVIDIA driver": no driver on the node. Either way that node cannot run GPU work until it is fixed.
NVML_MISMATCH = Verdict("candidate", "gpu_hardware", "infrastructure", 50,
                        "the node's NVIDIA kernel module and driver libraries differ: the driver was updated "
                        "without a reload or reboot")
NO_DRIVER = Verdict("candidate", "gpu_hardware", "infrastructure", 50, "the NVIDIA driver is not loaded on the node")
NVML_MISMATCH_UNDECIDED = Verdict("candidate", "unknown", "unknown", 45,
                                  "NVML's driver/library version mismatch, in the job's output only: the node's driver "
                                  "packages changed under its loaded module, or the job's container image ships "
                                  "NVIDIA driver libraries of its own; nvidia-smi on the node tells",
                                  readings=("node_failure", "application"))
NVML_MISMATCH_UNDECIDED_ACTIONS = (
    "run nvidia-smi on the node outside the job: if it fails too, drain and reboot the node (its driver changed "
    "under the loaded module); if it works, remove the NVIDIA driver libraries from the job's image or "
    "LD_LIBRARY_PATH",)
# nvidia-smi's line after its mismatch report: the version of the NVML library it loaded
_NVML_LIBRARY_VERSION = re.compile(r"NVML library version: (\d[\w.-]{0,40})")


def _printed_library_version(line: Line) -> Optional[str]:
    """The NVML library version nvidia-smi printed after its mismatch report, if it did."""
    return next((m.group(1) for m in map(_NVML_LIBRARY_VERSION.search, line.iter_following(2)) if m), None)


def _libraries_not_the_nodes(facts: Optional[NodeFacts], client_version: Optional[str]) -> bool:
    """Whether a driver version mismatch was the job's environment's: the node's own nvidia-smi listed its GPUs after
    the job (its facts), so the node's libraries match its module, and the version the job's side reported (where
    known) is not the module's. A node whose nvidia-smi failed too, or a job that used the module's own version
    (the node changed after the job), says nothing of the sort."""
    if facts is None or not facts.gpus:
        return False
    # compared as written: the kernel logs its API mismatch only where the client's string is not the module's, so a
    # client whose string differs from the node's driver's by a zero (550.127.5 against 550.127.05) is not the node's
    return client_version is None or facts.driver_version is None or client_version != facts.driver_version


def _no_nvidia_driver(facts: Optional[NodeFacts]) -> bool:
    """The node's facts say it ran no NVIDIA kernel module after the job (no /proc/driver/nvidia/version, no GPU):
    a CPU node, where no driver/library mismatch can happen; the job's words of one are its own print."""
    return facts is not None and not facts.gpus and not facts.driver_version


def _version(text: str) -> tuple[object, ...]:
    """A driver version as TensorFlow reads one (its numbers: it prints 550.127.5 for nvidia-smi's 550.127.05)."""
    return tuple(int(part) if part.isdecimal() else part for part in text.strip().split("."))


def _libraries_undecided(sym: Symptom) -> None:
    """The mismatch is the node's driver or the job's environment's, and nothing of the node's tells which."""
    apply_verdict(sym, NVML_MISMATCH_UNDECIDED)
    sym.actions = NVML_MISMATCH_UNDECIDED_ACTIONS


def _job_libraries(sym: Symptom) -> None:
    """The mismatch is the job's environment's (a container image that ships libnvidia-ml or libnvidia-compute, an
    LD_LIBRARY_PATH), not the node's."""
    apply_verdict(sym, JOB_NVML_MISMATCH)
    sym.actions = ("run the job's container without NVIDIA driver libraries of its own (let the container runtime "
                   "mount the node's: nvidia-container-toolkit, enroot's or Apptainer's --nv) and check "
                   "LD_LIBRARY_PATH for another driver's libnvidia-ml",)


@decoder("rocm_platform")
def decode_rocm_platform(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The ROCm runtime's word about the node's platform (PCIe atomics the board does not route): the node's, unless
    the node's facts list GPUs, which NVIDIA's tools (nvidia-smi, NVML, DCGM) found after the job: then the node
    runs no AMD GPU for ROCm to speak of, and the line is the program's own print."""
    facts = ctx.bundle.facts_for(sym.node)
    if facts is not None and facts.gpus:
        sym.role, sym.strength = "context", 0
        sym.notes.append(f"{sym.node}'s facts list NVIDIA GPUs: a ROCm runtime line names none of its parts")
    return True


@decoder("dso_mismatch")
def decode_dso_mismatch(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """TensorFlow's 'kernel version X does not match DSO version Y': libcuda in the job's environment is not the
    loaded module's version, as NVML's mismatch (:func:`decode_nvml`): the node's where its own nvidia-smi failed
    after the job too, the job's environment's where it worked on module X, both readings otherwise."""
    facts = ctx.bundle.facts_for(sym.node)
    if _no_nvidia_driver(facts):
        _job_libraries(sym)
        return True
    if facts is not None and not facts.gpus:
        return True  # the node's own nvidia-smi failed too: its driver
    module = str(sym.fields.get("kernel_version", ""))
    if facts is not None and facts.driver_version and _version(module) == _version(facts.driver_version):
        _job_libraries(sym)  # the module the node's own nvidia-smi reported after the job: the job's libcuda
    else:
        # no facts; or a module the node's nvidia-smi did not report (the node changed after the job, or the line
        # is not this node's): both readings
        _libraries_undecided(sym)
    return True


@decoder("nvidia_api_mismatch")
def decode_api_mismatch(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The kernel module refused a client of another version: the node's driver, unless the node's own nvidia-smi
    worked after the job and the client's version is not the module's (the job brought its own libraries)."""
    client = sym.fields.get("client_version")
    if client is None:
        found = _CLIENT_VERSION.search(" ".join([extra["text"], *line.iter_following(2)]))
        client = found.group(1) if found else None
    if _libraries_not_the_nodes(ctx.bundle.facts_for(sym.node), str(client) if client is not None else None):
        _job_libraries(sym)
    return True


# the newer wording's version, on the line after the client's name ('NVRM: has the version 570.86, but ...')
_CLIENT_VERSION = re.compile(r"has the version (\d[\w-]{0,15}(?:\.\d[\w-]{0,15}){0,4}), but")


JOB_NVML_MISMATCH = Verdict("candidate", "application", "workload", 45,
                            "the job's NVML library is not the node's driver's, and the node's own nvidia-smi worked "
                            "after the job: the job's environment brought other driver libraries (a container image)")
_DRIVER_ACTIONS = {
    NVML_MISMATCH: ("drain the node and reboot it (or reload the nvidia kernel modules): its driver packages "
                    "changed under the loaded module; pin them or keep them out of unattended upgrades",),
    NO_DRIVER: ("drain the node; load the NVIDIA driver (modprobe nvidia, or rebuild it for the running kernel "
                "with DKMS) and check that nvidia-smi works before returning it to service",),
}
_PCI = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\b")


def nvml_verdict(text: str) -> Optional[Verdict]:
    """The verdict of NVML's error text, in its message form ('GPU is lost') or its enum name as the Go and C
    bindings print it ('ERROR_GPU_IS_LOST', 'NVML_ERROR_RESET_REQUIRED')."""
    lowered = text.lower().replace("_", " ")
    if "gpu is lost" in lowered:
        return GPU_LOST
    if "requires reset" in lowered or "reset required" in lowered:
        return GPU_RESET
    if "version mismatch" in lowered:
        return NVML_MISMATCH
    if "driver not loaded" in lowered or "couldn't communicate with the nvidia driver" in lowered:
        return NO_DRIVER
    if "no devices were found" in lowered:
        return NO_DEVICES
    if "unable to determine the device handle" in lowered and "unknown error" in lowered:
        return GPU_NO_HANDLE
    return None


def set_gpu(sym: Symptom, text: str) -> None:
    match = _PCI.search(text)
    if match is None:
        return
    try:
        sym.gpu = normalise_pci(match.group(0))
        sym.fields["pci"] = sym.gpu
    except ValueError:
        pass


@decoder("gpu_nvml")
def decode_nvml(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """NVML's error strings as nvidia-smi, slurmstepd, the k8s device plugin or DCGM print them."""
    verdict = nvml_verdict(extra["text"])
    if verdict is None:
        return False
    apply_verdict(sym, verdict)
    sym.actions = _DRIVER_ACTIONS.get(verdict, sym.actions)
    collected = bool(sym.evidence) and sym.evidence[0].source != SOURCE_APP
    if collected and verdict in (GPU_LOST, GPU_NO_HANDLE):
        # the collector's own nvidia-smi after the job found the GPU gone: a job can hang on it (params.hangs of
        # final.scheduler_state); the job's own print of the words is no such record
        sym.fields["hang_kind"] = "gpu_lost"
    elif collected and verdict is GPU_RESET:
        sym.fields["hang_kind"] = "gpu_reset_required"
    set_gpu(sym, extra["text"])
    facts = ctx.bundle.facts_for(sym.node)
    from_job = bool(sym.evidence) and sym.evidence[0].source == SOURCE_APP
    if verdict is NVML_MISMATCH and from_job and (_libraries_not_the_nodes(facts, _printed_library_version(line))
                                                  or _no_nvidia_driver(facts)):
        _job_libraries(sym)
        return True
    if verdict is NVML_MISMATCH and from_job and (facts is None or facts.gpus):
        # the job's word alone: the node's packages changed under its loaded module, or the job's image brought
        # driver libraries of its own (libnvidia-compute, a newer CUDA's); the kernel's 'NVRM: API mismatch' follows
        # either. The node's nvidia-smi after the job (its facts) tells them apart; without it, both readings, and
        # so where it worked with the very library version the job printed (the node changed after the job, or the
        # job printed the node's version: nothing of the node's confirms a mismatch)
        _libraries_undecided(sym)
        return True
    if sym.gpu and from_job and facts is not None and facts.gpus \
            and all(pci != sym.gpu for pci, _, _ in facts.gpus):
        # the job's output names a GPU the node's facts (nvidia-smi after the job) do not list: a GPU lost during
        # the job is missing from them too, but so is another machine's (a capture the job printed); the job's
        # output alone does not name this node for it (final.root_cause)
        sym.fields["gpu_not_in_facts"] = True
        sym.strength = min(sym.strength, 35)  # a claim nothing of the node's confirms: the job's own errors outweigh it
        sym.notes.append(f"GPU {sym.gpu} is not among {sym.node}'s GPUs in its facts: lost, or another machine's")
    return True


AMD_CANNOT_START = Verdict("candidate", "gpu_hardware", "infrastructure", 70,
                           "the GPU could not be brought up by the driver (firmware, PSP, bus or board)")
AMD_UNCORRECTABLE = Verdict("candidate", "gpu_hardware", "infrastructure", 75, "uncorrectable hardware error (RAS)")
AMD_MEMORY = Verdict("candidate", "gpu_memory", "infrastructure", 75, "uncorrectable error in the GPU's memory (UMC)")


# the RAS report's count of uncorrectable errors in the memory controller (amdgpu_umc.c, after the interrupt's
# 'uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!'): the event is the GPU's memory; a zero count
# and 'no uncorrectable hardware errors detected in umc block' say it is not
# A VM fault by one of the GPU's engines the driver and the ROCm runtime program (gfxhub_v*_0.c, gmc_v9_0.c:
# '\t Faulty UTCL2 client ID: SDMA0 (0xd)' under the fault): the copy engines (SDMA, which HIP's copies use too),
# the command processor's fetchers (CPC, CPF, CPG), the RLC, the firmware's and video blocks. A shader's access (TCP,
# SQC, TA) is the program's own; one of these is the driver's or firmware's (a kernel regression, a KFD restore that
# failed) as often as the program's buffers.
AMD_ENGINE_FAULT = Verdict("candidate", "unknown", "unknown", 45,  # as strong as the code's reading of a fault
                           "a GPU page fault by an engine the driver and runtime program (a copy engine, the command "
                           "processor, the RLC or firmware), not a shader: the driver or firmware (a kernel "
                           "regression) or the program's buffers; the same run on another kernel or driver tells",
                           readings=("node_failure", "application"))
_AMD_FAULT_CLIENT = re.compile(r"Faulty UTCL2 client ID: (\w+)")
_AMD_ENGINE_CLIENTS = re.compile(r"SDMA\d*|CP[CFG]|RLC|MP[01]|VCN\w*|JPEG\w*|HDP|OSS|XDP")


def _amd_fault_client(line: Line) -> str | None:
    """The UTCL2 client the fault's status lines name (the next lines of the same device's report, up to the next
    fault), or None: a line without the fault line's 'amdgpu <pci>:' is not the driver's report of it."""
    device = _AMD_DEVICE.search(line.text)
    if device is None:
        return None
    for text in line.following(12):
        if "page fault" in text:
            return None
        found = _AMD_FAULT_CLIENT.search(text)
        if found:
            return found.group(1) if device.group(0) in text[:found.start()] else None
    return None


_AMD_DEVICE = re.compile(r"amdgpu [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:")


_AMD_UMC_ERRORS = re.compile(r"(?<!\d)[1-9]\d{0,5} (?:new )?uncorrectable hardware errors detected in "
                             r"(?:umc|UMC) [Bb]lock")


# the rule's own action (drain the node, check the GPU's RAS counters) is for the readings that blame the GPU
_AMD_PAGE_FAULT_ACTIONS = ("debug the program's GPU memory accesses (a buffer out of bounds or already freed: "
                           "rocgdb, the address sanitizer of ROCm); the same fault on another node confirms it is "
                           "the code's",)
_AMD_ENGINE_FAULT_ACTIONS = ("run the job again on another node, kernel or ROCm version: a fault of a copy engine or "
                             "the firmware is the driver's as often as the program's buffers'",)
_AMD_HANG_ACTIONS = ("see whether the ring timeout follows this GPU (other jobs, rocm-smi / amd-smi RAS counters: "
                     "drain it then) or this program (the same hang on another node: a kernel that never ends)",)


@decoder("amdgpu")
def decode_amdgpu(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Which amdgpu line it is: a GPU that cannot start or an uncorrectable RAS error is the GPU's; a ring
    timeout and the reset it starts carry both readings; a VM page fault (gmc's '[gfxhub] page fault ...,
    for process <comm> pid <n>') is a process's access its GPU page tables refused, the MMU fault NVIDIA
    logs as Xid 31: the code's, as app.gpu_hsa_fault's page faults are, unless the status lines under it name an
    engine the driver programs as the faulting client (both readings). The GPU is the one the line's PCI address
    names."""
    error = str(sym.fields.get("error", ""))
    if "uncorrectable" in error:
        memory = str(sym.fields.get("block", "")).lower() == "umc" or (
            "detected!" in error and any(_AMD_UMC_ERRORS.search(text) for text in line.iter_following(4)))
        apply_verdict(sym, AMD_MEMORY if memory else AMD_UNCORRECTABLE)
    elif "page fault" in error:
        client = _amd_fault_client(line)
        if client:
            sym.fields["client"] = client
        engine = bool(client and _AMD_ENGINE_CLIENTS.fullmatch(client))
        apply_verdict(sym, AMD_ENGINE_FAULT if engine else KERNEL_BUG)
        sym.actions = _AMD_ENGINE_FAULT_ACTIONS if engine else _AMD_PAGE_FAULT_ACTIONS
    elif "timeout" in error or "reset begin" in error:
        apply_verdict(sym, INDETERMINATE)
        sym.actions = _AMD_HANG_ACTIONS
    else:
        apply_verdict(sym, AMD_CANNOT_START)
    pci = sym.fields.get("pci") or sym.fields.get("probed")
    if isinstance(pci, str):
        set_gpu(sym, pci)
    return True


@decoder("level_zero_memory")
def decode_level_zero_memory(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """Level Zero's out-of-memory codes: the device's is the job's tensors on the GPU, the host's the host's."""
    if sym.fields.get("hostmem"):
        sym.kind, sym.category, sym.strength = "host_alloc_error", "host_oom", 45
        sym.actions = ("reduce the job's host memory use (DataLoader workers, pinned buffers) or ask for more "
                       "memory per node",)
    return True


@decoder("gpu_driver_library_missing")
def decode_driver_library_missing(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The node's driver or the job's container: both readings (see DRIVER_LIBRARY_MISSING)."""
    apply_verdict(sym, DRIVER_LIBRARY_MISSING)
    return True


@decoder("gpu_driver_too_old")
def decode_driver_too_old(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """The job's build or image or the node's driver: both readings (see DRIVER_TOO_OLD)."""
    apply_verdict(sym, DRIVER_TOO_OLD)
    return True


@decoder("gpu_indeterminate")
def decode_indeterminate(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A device error that names no cause, in a runtime other than CUDA's: ROCm's GPU page fault ('Memory
    access fault by GPU node-N ... Reason: ...', HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION), level-zero's
    lost device. A kernel's bad address or hang as often as a failing GPU, so both readings unless a
    hardware fault on the node explains it (refine.gpu_indeterminate_cuda_error). A page fault whose reason
    ROCr decodes as the access itself (a page not mapped, written while read-only, executed while NX, or the
    host's only) is ROCm's illegal address (CUDA 700): the code's, as CUDA's is."""
    reason = str(sym.fields.get("reason") or "")
    null = _NULL_ADDRESS.fullmatch(str(sym.fields.get("address") or "")) and not _HSA_NAMED_CAUSE.match(reason)
    apply_verdict(sym, KERNEL_BUG if null or _HSA_ACCESS_REASON.match(reason) else INDETERMINATE)
    return True


# glibc's '%p' of a null pointer, or a small offset from one (a member of a struct at NULL): a null dereference
# in the kernel's code, whatever reason ROCr gives ('Unknown.'), unless it names a cause of its own
_NULL_ADDRESS = re.compile(r"\(nil\)|0x0*[0-9a-fA-F]{1,3}")
_HSA_NAMED_CAUSE = re.compile(r"(?:DRAM |SRAM )?ECC failure|Generic hang recovery")


# the reasons ROCr's VMFaultHandler prints for an access the page tables refused (runtime.cpp); 'Unknown.', 'Generic
# hang recovery.' and the ECC reasons (app.gpu_hsa_ecc_fault) name no access
_HSA_ACCESS_REASON = re.compile(r"(?:Page not present or supervisor privilege|Write access to a read-only page|"
                                r"Execute access to a page marked NX|Host access only)\b")


# --- pasted diagnostic output (diag/NODE.txt) -------------------------------------------------------

DIAG_GPU = Verdict("candidate", "gpu_hardware", "infrastructure", 60)
DIAG_MEMORY = Verdict("candidate", "gpu_memory", "infrastructure", 60)
DIAG_NVLINK = Verdict("candidate", "nvlink", "infrastructure", 55)
# DCGM_FR_NVLINK_DOWN ("GPU N's NvLink link L is currently down") as the only reason a test failed: on a
# GPU without NVLink (PCIe cards) DCGM reports every link down, a false positive (NVIDIA/DCGM #49)
DIAG_NVLINK_DOWN = Verdict("candidate", "unknown", "unknown", 40,
                           "DCGM failed the test for NVLink links that are down: a false positive on GPUs without "
                           "NVLink (check nvidia-smi nvlink -s / topo -m before draining)")
_NVLINK_DOWN = re.compile(r"NvLink\s*link\s*\d+\s*is\s*currently\s*down")
_OTHER_WARNING = re.compile(r"(?i)error|fail|exceed|uncorrect|retired|throttl|mismatch|violat|bandwidth|timeout")
# dcgmi diag deployment checks that fail for configuration, not hardware
_DCGM_CONFIG_TESTS = re.compile(r"(?i)denylist|blacklist|library|libraries|permission|persistence|environment|"
                                r"graphics process|compute process|software|driver")
_DCGM_MEMORY_TESTS = re.compile(r"(?i)memory|memtest|page retirement|row remap|ecc")
_DCGM_NVLINK_TESTS = re.compile(r"(?i)nvlink|nvswitch|fabric")
_FAN_ONLY_ERR = re.compile(r"^\s*\|\s*ERR!\s+\d+C\b")
# the power draw's reading ('| N/A   29C    P0   ERR! / 250W |'): NVML's power query failing once, which Azure's
# HPC diagnostics maintainers call transient with nothing to do (azhpc-diagnostics#77)
_POWER_ERR = re.compile(r"\bERR!\s*/\s*(?:\d+W|ERR!|N/A)")
_SMI_GPU_HEADER = re.compile(r"^GPU (?P<pci>[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")


def _diag_verdict(sym: Symptom) -> Optional[Verdict]:
    finding = str(sym.fields.get("finding", ""))
    if finding == "dcgm_fail" and sym.fields.get("reason"):
        return DIAG_MEMORY  # a deployment check's Error whose reason is the GPU's memory (the rule's regex)
    if finding == "dcgm_fail":
        test = str(sym.fields.get("test", ""))
        if _DCGM_CONFIG_TESTS.search(test):
            return None
        if _DCGM_MEMORY_TESTS.search(test):
            return DIAG_MEMORY
        return DIAG_NVLINK if _DCGM_NVLINK_TESTS.search(test) else DIAG_GPU
    return {"err": DIAG_GPU, "pending": DIAG_MEMORY, "remap_failure": DIAG_MEMORY, "reset": DIAG_GPU,
            "link_inactive": DIAG_NVLINK, "unreadable": DIAG_GPU, "fabric_not_ready": DIAG_NVLINK,
            "fabric_unhealthy": DIAG_NVLINK}.get(finding)


# DCGM's reasons for a test that could not run on the GPU (dcgm_errors.h: DCGM_FR_CUDA_API 'Error using CUDA API
# cuCtxCreate', DCGM_FR_CUDA_CONTEXT 'failed to create a CUDA context', with CUDA's 'busy or unavailable'): the table
# wraps them mid-word, so they are matched in the Warning cells joined without separators
_DIAG_COULD_NOT_RUN = re.compile(r"(?i)busy\s*or\s*unavailable|Unable\s*to\s*cre\s*ate\s*CUDA\s*context|"
                                 r"failed\s*to\s*create\s*a\s*CUDA\s*context")
# a dcgmi diag result row that failed ('| Persistence Mode          | Fail                |')
_DCGM_FAIL_ROW = re.compile(r"^\|\s*[A-Za-z][\w /-]{1,40}?\s*\|\s*Fail\s*\|")


# the deployment checks that read a GPU field (Software.cpp: checkPageRetirement, checkRowRemapping, checkInforom),
# which fail with DCGM_FR_FIELD_QUERY when DCGM cannot read it
_DCGM_FIELD_CHECKS = re.compile(r"(?i)page retirement|row remap|inforom")


def _deployment_cascade(line: Line) -> bool:
    """Whether the deployment checks around this failed row failed by the handful (three others at least:
    persistence mode, environment, graphics processes ..., no reason given): DCGM failing to query the GPU's
    fields, whose page retirement and inforom checks then fail with the rest (DCGM_FR_FIELD_QUERY), not retired
    pages or a corrupt InfoROM. One or two configuration checks failing beside it (persistence mode off, an
    environment variable set) are no such cascade."""
    rows = [*line.preceding(8), *line.following(8)]
    return sum(1 for text in rows if _DCGM_FAIL_ROW.match(text.strip())) >= 3


def heading_above(line: Line) -> str:
    """The nearest non-blank line above: in nvidia-smi -q, the heading of the block a field opens."""
    return next((text.strip() for text in line.preceding(3) if text.strip()), "")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def enclosing_headings(line: Line, depth: int, limit: int = 16) -> list[str]:
    """The headings of the nvidia-smi -q blocks a field sits in, innermost first, ``depth`` of them at most:
    each the nearest line above indented less than the one below it ('Health', then 'Fabric')."""
    headings: list[str] = []
    indent = _indent(line.text[len(line.lead):])  # its neighbours come without the lead (a paste's '> ') too
    for text in line.preceding(limit):
        if not text.strip() or _indent(text) >= indent:
            continue
        headings.append(text.strip())
        indent = _indent(text)
        if len(headings) == depth:
            break
    return headings


# the fabric health values of a fabric that still routes every GPU's traffic, at less than full bandwidth
DIAG_FABRIC_DEGRADED = Verdict("candidate", "nvlink", "infrastructure", 35,
                               "the NVLink fabric runs with fewer links (limited capacity, degraded bandwidth): "
                               "slower collectives, not a failure by itself")


def _dcgm_test_of(line: Line) -> str:
    """The test a dcgmi diag result row without a name belongs to: the nearest row above that names one."""
    for text in line.preceding(10):
        parts = text.split("|")
        if len(parts) < 3:
            return ""
        name = parts[1].strip()
        if name:
            return name
    return ""


def _dcgm_cells_below(line: Line, limit: int, names: tuple[str, ...] = ("",)) -> list[str]:
    """The second cells of the dcgmi diag table rows below this one whose first cell is one of ``names``
    (the table wraps a long cell onto rows with an empty first column), up to the first other row."""
    cells: list[str] = []
    for text in line.iter_following(limit):
        parts = text.split("|")
        if len(parts) < 3 or parts[1].strip() not in names:
            break
        cells.append(parts[2].strip())
    return cells


def _dcgm_warning(line: Line) -> str:
    """The Warning cell of a dcgmi diag test row, which the table wraps over the rows below it (mid-word):
    the cells joined without separators, up to the next test's row."""
    return "".join(_dcgm_cells_below(line, 40, ("", "Warning", "Info")))


# the states in which a job ran out of time: a GPU held at a fraction of its clocks explains that
_OUT_OF_TIME = frozenset({"TIMEOUT", "DEADLINE"})
_IDLE_ACTIVE = re.compile(r"Idle\s*:\s*Active\b")
_NAMED_SLOWDOWN = re.compile(r"HW (?:Thermal|Power Brake) Slowdown\s*:\s*Active\b")


@decoder("gpu_clock_slowdown")
def decode_clock_slowdown(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A hardware slowdown nvidia-smi -q shows is a candidate only for a job that ran out of time, and not on an
    idle GPU: the power brake is the node's (its power supply or BMC), a thermal or plain slowdown the GPU's; a
    plain one whose cause the block names below it leaves the verdict to that line."""
    block = [text.strip() for text in line.preceding(8)]
    if ctx.job.state not in _OUT_OF_TIME or any(_IDLE_ACTIVE.match(text) for text in block):
        return True
    if sym.fields.get("reason") == "HW Slowdown" and any(_NAMED_SLOWDOWN.match(text.strip())
                                                          for text in line.iter_following(2)):
        return True  # the cause named below it says more
    sym.role, sym.strength = "candidate", 45
    if sym.fields.get("reason") == "HW Power Brake Slowdown":
        sym.category = "node_failure"
    for previous in line.preceding(60):
        header = _SMI_GPU_HEADER.match(previous.strip())
        if header is not None:
            set_gpu(sym, header.group(0))
            break
    return True


def _in_processes_table(line: Line) -> bool:
    """Whether the table row sits under nvidia-smi's '| Processes:' header (the rows above it, up to the table's
    start, are all table lines)."""
    for previous in line.preceding(200):
        text = previous.strip()
        if not text.startswith(("|", "+")):
            return False
        if text.startswith("| Processes"):
            return True
    return False


@decoder("gpu_diag")
def decode_diag(ctx: EngineContext, sym: Symptom, line: Line, extra: dict[str, Any]) -> bool:
    """A fault line in nvidia-smi / nvidia-smi -q / nvidia-smi nvlink -s / dcgmi diag output: a GPU
    fault candidate on the node the output came from, on the GPU its section names."""
    sym.fields.setdefault("finding", str(extra["rule"].emit.get("finding", "")))
    if sym.fields["finding"] == "err" and extra["text"].count("ERR!") == 1 and (
            _FAN_ONLY_ERR.match(extra["text"]) or _POWER_ERR.search(extra["text"])):
        return False  # a fan or a power reading alone: a sensor or driver quirk, not a GPU in a bad state
    if sym.fields["finding"] == "err" and _in_processes_table(line):
        return False  # a process row: its name is whatever the process calls itself ('ERR! ERR!' included)
    if sym.fields["finding"] == "dcgm_fail" and not sym.fields.get("test") and not sym.fields.get("reason"):
        sym.fields["test"] = _dcgm_test_of(line)  # a result the table wrapped under its test's row
    if sym.fields["finding"] == "fabric_not_ready" and heading_above(line) != "Fabric":
        return False  # a State line of another block
    if sym.fields["finding"] == "fabric_unhealthy" and enclosing_headings(line, 2) != ["Health", "Fabric"]:
        return False  # a Summary or Bandwidth line of another block
    verdict = _diag_verdict(sym)
    if sym.fields["finding"] == "fabric_unhealthy" and (sym.fields.get("health") == "Limited Capacity"
                                                         or sym.fields.get("bandwidth")):
        verdict = DIAG_FABRIC_DEGRADED
    if verdict is None:
        return False
    if sym.fields["finding"] == "dcgm_fail":
        if not sym.fields.get("reason") and _DCGM_FIELD_CHECKS.search(str(sym.fields.get("test", ""))) \
                and _deployment_cascade(line):
            return False  # failing with the other deployment checks: fields DCGM could not read
        warning = _dcgm_warning(line)
        if _NVLINK_DOWN.search(warning) and not _OTHER_WARNING.search(_NVLINK_DOWN.sub("", warning)):
            verdict = DIAG_NVLINK_DOWN
        elif _DIAG_COULD_NOT_RUN.search(" ".join(warning.split())):
            sym.role, sym.strength = "context", 0
            sym.notes.append("the diagnostic could not use the GPU (busy or unavailable: held by another process or "
                             "needing a reset): its test did not run, and says nothing of the GPU's hardware")
            set_gpu(sym, extra["text"])
            return True
    apply_verdict(sym, verdict)
    if sym.fields.get("reason"):
        reason = " ".join([str(sym.fields["reason"]), *_dcgm_cells_below(line, 10)])
        sym.fields["reason"] = " ".join(reason.split())[:300]
        sym.summary = f"dcgmi diag on {sym.node}: {sym.fields['reason']}"
    if sym.fields["finding"] == "pending" and sym.fields.get("field") != "Remapping Failure Occurred" \
            and _pending_from_correctable(line):
        # rows or pages pending from correctable errors only: the next reset applies the remap; the
        # running job did not see a wrong bit (NVIDIA's A100 memory error management guide)
        sym.role, sym.strength = "context", 0
        sym.notes.append("pending from correctable errors only: a GPU reset activates it; no job was affected")
    set_gpu(sym, extra["text"])
    if sym.gpu is None:
        for previous in line.preceding(3 if sym.fields.get("finding") == "err" else 400):
            header = _SMI_GPU_HEADER.match(previous.strip()) or (
                _PCI.search(previous) if sym.fields.get("finding") == "err" else None)
            if header is not None:
                set_gpu(sym, header.group(0))
                break
    return True


# the counts in the same nvidia-smi -q block as a 'Pending : Yes': Remapped Rows' 'Uncorrectable Error', Retired
# Pages' 'Double Bit ECC' (N/A where the GPU remaps rows instead)
_PENDING_CAUSE_COUNT = re.compile(r"^\s*(?:Uncorrectable Error|Double Bit ECC)\s*:\s*(\d+)\s*$")
_BLOCK_HEADER = re.compile(r"^\s*(?:Remapped Rows|Retired Pages|GPU [0-9A-Fa-f]{4,8}:|ECC Errors)\s*$")


def _pending_from_correctable(line: Line) -> bool:
    """Whether the pending retirement or remap of this block comes from correctable errors only: its
    uncorrectable (or double-bit) count, read in the block, is zero."""
    for text in line.preceding(6):
        count = _PENDING_CAUSE_COUNT.match(text)
        if count is not None:
            return int(count.group(1)) == 0
        if _BLOCK_HEADER.match(text):
            return False
    return False


@rule("refine.gpu_indeterminate_cuda_error")
def indeterminate_cuda_error(ctx: EngineContext, rule_: Rule) -> int:
    """A CUDA error that could be a GPU fault or a kernel bug ('unspecified launch failure', 'unknown
    error') and that no hardware fault explained carries both readings: if it leads alone, FINAL says
    ambiguous with a candidate per category of ``params.readings`` (GPU hardware, application) instead
    of guessing either."""
    readings = str_list(rule_, "readings")
    count = 0
    for sym in ctx.active():
        if sym.fields.get("indeterminate") and sym.role == "candidate" and sym.supports is None:
            sym.fields["readings"] = list(readings)
            count += 1
    return count


# --- Xid 45 naming an Xid the log does not hold ------------------------------------------------------


@rule("filter.gpu_xid_named_cause")
def xid_named_cause(ctx: EngineContext, rule_: Rule) -> int:
    """Xid 45 '... caused by previous Xid N' when Xid N itself is not in the log (rotated away, or a
    driver that folds it into the 45 line): the named Xid is the fault, on the 45's node and GPU."""
    present = {(s.node, s.fields.get("code")) for s in ctx.symptoms if s.kind == "xid"}
    count = 0
    for sym in ctx.active():
        cause = sym.fields.get("caused_by_xid")
        if sym.kind != "xid" or sym.supports or not isinstance(cause, int) or (sym.node, cause) in present:
            continue
        pci = str(sym.fields.get("pci") or sym.gpu or "0000:00:00")
        event = XidEvent(pci=pci, code=cause, gpu_instance=None, compute_instance=None, pid=None, process=None,
                            message=str(sym.fields.get("message", "")))
        assessment = assess_xid(event, _driver(ctx, sym.node))
        if assessment.role != "candidate" or assessment.responsible != "infrastructure":
            continue
        sym.role, sym.category, sym.responsible = "candidate", assessment.category, assessment.responsible
        sym.strength = max(assessment.strength - 10, 40)
        sym.summary = f"xid 45 names previous xid {cause} (not in the log): {assessment.summary}"[:300]
        sym.actions = assessment.actions
        sym.notes.append(f"the log holds no xid {cause} line; the xid 45 names it as its cause")
        count += 1
    return count


def _driver(ctx: EngineContext, node: Optional[str]) -> Optional[str]:
    facts = ctx.bundle.facts_for(node)
    return facts.driver_version if facts else None
