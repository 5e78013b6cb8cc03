"""Capture real GPU tool output and real failure logs on a machine with an NVIDIA GPU, for test data.

    python3 tests/data/gpu/capture.py OUTDIR [STEP ...]   (the named steps only; all by default)

What it runs, each bounded by a timeout, its stdout and stderr kept together as a job's output file would
(a header line names the command, its exit status and time):

- the tools the node collector runs or an admin runs beside it: ``nvidia-smi -q -x``, ``nvidia-smi -q``,
  the plain table, ``topo -m``, ``nvlink -s``, the ECC / row-remapper / retired-page sections, ``dcgmi``
  where installed, and an NVML reading through ``pynvml`` where installed;
- real failures, one process each: PyTorch's CUDA out of memory (a huge request, and a realistic one after
  most of the card is taken), a device-side assert (index out of bounds), an illegal memory access (a CuPy
  kernel writing to an unmapped address, alone and inside a PyTorch process), a ProcessGroupNCCL watchdog
  timeout (a collective queued behind a long kernel, 5 s timeout, NCCL_DEBUG=INFO, under torchrun), two
  ranks on one GPU (NCCL's duplicate-GPU check), the c10d store's timeouts on both sides, torchrun's failure
  summary for a child that raised and one killed by SIGKILL, and JAX's out of memory;
- a misaligned write and a trap instruction in a kernel (the "misaligned address" and "unspecified launch
  failure" forms, and the Xid 13 they leave);
- the kernel log before and after (``dmesg``, raw and ISO stamps): the Xids those failures leave.

Everything lands in OUTDIR/capture.tgz (rewritten after each step, so a run cut short still leaves what it
got); a step that outlives its timeout is killed with its whole process group (torchrun's workers too).
Nothing is changed on the machine but the GPU's memory while a step runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from pathlib import Path

SCRIPTS = {
    "oom_huge.py": """
        import torch
        print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), flush=True)
        x = torch.empty(1 << 40, dtype=torch.uint8, device="cuda")
    """,
    "oom_realistic.py": """
        import torch
        held = torch.empty(100 << 30, dtype=torch.uint8, device="cuda")
        more = torch.empty(60 << 30, dtype=torch.uint8, device="cuda")
    """,
    "device_assert.py": """
        import torch
        table = torch.zeros(4, device="cuda")
        index = torch.tensor([7], device="cuda")
        picked = table[index]
        torch.cuda.synchronize()
        print(picked)
    """,
    "illegal_cupy.py": """
        import cupy as cp
        import numpy as np
        kernel = cp.RawKernel(r'extern "C" __global__ void bad(int* p) { p[threadIdx.x] = 1; }', "bad")
        kernel((1,), (32,), (np.uint64(0x10),))
        cp.cuda.runtime.deviceSynchronize()
    """,
    "illegal_torch.py": """
        import torch
        import cupy as cp
        import numpy as np
        x = torch.ones(1 << 20, device="cuda")
        kernel = cp.RawKernel(r'extern "C" __global__ void bad(int* p) { p[threadIdx.x] = 1; }', "bad")
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel((1,), (32,), (np.uint64(0x10),))
        y = x * 2
        torch.cuda.synchronize()
        print(y.sum().item())
    """,
    "watchdog.py": """
        import datetime
        import os
        import torch
        import torch.distributed as dist
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=5))
        x = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        print("rank", dist.get_rank(), "first all_reduce done", flush=True)
        torch.cuda._sleep(int(1e11))
        dist.all_reduce(x)
        torch.cuda.synchronize()
        print("not reached", flush=True)
    """,
    "two_ranks_one_gpu.py": """
        import datetime
        import torch
        import torch.distributed as dist
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=30))
        x = torch.ones(1024, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        print("rank", dist.get_rank(), "all_reduce done:", x[0].item(), flush=True)
    """,
    "store_server_timeout.py": """
        import datetime
        import os
        import torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="2")
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=8))
    """,
    "store_client_timeout.py": """
        import datetime
        import os
        import torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29534", RANK="1", WORLD_SIZE="2")
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=8))
    """,
    "child_raises.py": """
        import os
        import time
        if os.environ["LOCAL_RANK"] == "1":
            raise ValueError("loss is nan at step 1200")
        time.sleep(20)
    """,
    "child_killed.py": """
        import os
        import signal
        import time
        if os.environ["LOCAL_RANK"] == "0":
            time.sleep(1)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(20)
    """,
    "jax_oom.py": """
        import os
        os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        import jax
        import jax.numpy as jnp
        print("jax", jax.__version__, jax.devices(), flush=True)
        x = jnp.ones((1 << 38,), dtype=jnp.float32)
        x.block_until_ready()
    """,
    "misaligned_torch.py": """
        import torch
        import cupy as cp
        x = torch.ones(1 << 20, device="cuda")
        kernel = cp.RawKernel(r'extern "C" __global__ void bad(char* p) { *(int*)(p + 1) = 1; }', "bad")
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel((1,), (1,), (cp.zeros(16, dtype=cp.int8),))
        y = x * 2
        torch.cuda.synchronize()
        print(y.sum().item())
    """,
    "trap_torch.py": """
        import torch
        import cupy as cp
        x = torch.ones(1 << 20, device="cuda")
        kernel = cp.RawKernel(r'extern "C" __global__ void bad() { asm volatile("trap;"); }', "bad")
        with cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            kernel((1,), (1,), ())
        y = x * 2
        torch.cuda.synchronize()
        print(y.sum().item())
    """,
    "nvml.py": """
        import pynvml as n
        n.nvmlInit()
        print("driver", n.nvmlSystemGetDriverVersion(), "nvml", n.nvmlSystemGetNVMLVersion())
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            def read(name, *args):
                try:
                    print(name, getattr(n, name)(h, *args))
                except n.NVMLError as exc:
                    print(name, "NVMLError:", exc)
            for name in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo",
                         "nvmlDeviceGetSerial", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetRemappedRows",
                         "nvmlDeviceGetRetiredPagesPendingStatus", "nvmlDeviceGetCurrentClocksEventReasons",
                         "nvmlDeviceGetPowerUsage", "nvmlDeviceGetPersistenceMode"):
                read(name)
            read("nvmlDeviceGetTemperature", n.NVML_TEMPERATURE_GPU)
            read("nvmlDeviceGetTotalEccErrors", n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC)
            read("nvmlDeviceGetTotalEccErrors", n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_AGGREGATE_ECC)
            read("nvmlDeviceGetNvLinkState", 0)
    """,
}

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]

# (output name, argv, timeout in seconds, extra environment)
STEPS: list[tuple[str, list[str], int, dict[str, str]]] = [
    ("uname", ["uname", "-a"], 10, {}),
    ("driver-version", ["cat", "/proc/driver/nvidia/version"], 10, {}),
    ("lscpu", ["lscpu", "-e"], 10, {}),
    ("nvidia-smi-q-x.xml", ["nvidia-smi", "-q", "-x"], 60, {}),
    ("nvidia-smi-q", ["nvidia-smi", "-q"], 60, {}),
    ("nvidia-smi", ["nvidia-smi"], 30, {}),
    ("nvidia-smi-q-d", ["nvidia-smi", "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE"], 30, {}),
    ("nvidia-smi-topo", ["nvidia-smi", "topo", "-m"], 30, {}),
    ("nvidia-smi-nvlink", ["nvidia-smi", "nvlink", "-s"], 30, {}),
    ("dcgmi-discovery", ["dcgmi", "discovery", "-l"], 30, {}),
    ("nvml", [sys.executable, "nvml.py"], 60, {}),
    ("dmesg-before", ["dmesg"], 10, {}),
    ("oom_huge", [sys.executable, "oom_huge.py"], 90, {}),
    ("oom_realistic", [sys.executable, "oom_realistic.py"], 90, {}),
    ("device_assert", [sys.executable, "device_assert.py"], 90, {}),
    ("illegal_cupy", [sys.executable, "illegal_cupy.py"], 90, {}),
    ("illegal_torch", [sys.executable, "illegal_torch.py"], 90, {}),
    ("misaligned_torch", [sys.executable, "misaligned_torch.py"], 90, {}),
    ("trap_torch", [sys.executable, "trap_torch.py"], 90, {}),
    ("watchdog", [*TORCHRUN, "--nproc_per_node=1", "watchdog.py"], 90, {"NCCL_DEBUG": "INFO"}),
    ("two_ranks_one_gpu", [*TORCHRUN, "--nproc_per_node=2", "two_ranks_one_gpu.py"], 90, {"NCCL_DEBUG": "WARN"}),
    ("store_server_timeout", [sys.executable, "store_server_timeout.py"], 60, {}),
    ("store_client_timeout", [sys.executable, "store_client_timeout.py"], 60, {}),
    ("child_raises", [*TORCHRUN, "--nproc_per_node=2", "child_raises.py"], 60, {}),
    ("child_killed", [*TORCHRUN, "--nproc_per_node=2", "child_killed.py"], 60, {}),
    ("jax_oom", [sys.executable, "jax_oom.py"], 90, {}),
    ("dmesg-after", ["dmesg"], 10, {}),
    ("dmesg-after-iso", ["dmesg", "--time-format=iso"], 10, {}),
    ("nvidia-smi-q-x-after.xml", ["nvidia-smi", "-q", "-x"], 60, {}),
]


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-capture-")) / "capture"
    scripts = work / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    for name, body in SCRIPTS.items():
        (scripts / name).write_text(textwrap.dedent(body).lstrip())
    wanted = set(sys.argv[2:])
    for name, argv, timeout, extra in STEPS:
        if wanted and name not in wanted:
            continue
        if shutil.which(argv[0]) is None and not os.path.isabs(argv[0]):
            (work / name).write_text(f"# {argv[0]}: not installed\n")
            continue
        started = time.monotonic()
        output, status = run(argv, scripts, {**os.environ, **extra}, timeout)
        header = f"# {' '.join(argv)} (env {extra}): exit {status}, {time.monotonic() - started:.1f} s\n"
        if name.endswith(".xml"):
            (work / name).write_bytes(output)
            (work / f"{name}.status").write_text(header)
        else:
            (work / name).write_bytes(header.encode() + output)
        print(header, end="", flush=True)
        with tarfile.open(out / "capture.tgz", "w:gz") as tar:
            tar.add(work, arcname="capture")
    return 0


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int) -> tuple[bytes, str]:
    """The command's output and exit status; past ``timeout`` its whole process group is killed."""
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
            return output, str(proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            return output, f"timeout after {timeout} s"


if __name__ == "__main__":
    sys.exit(main())
