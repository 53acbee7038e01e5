"""What the device a run lands on computes fast, read at run time, and what that decides.

Three parts, kept apart so that the decision is testable without the hardware:

* `DeviceCapabilities`: a typed record of what the device reports (a GPU's name and compute
  capability; a CPU's model, its /proc/cpuinfo flags and torch's vector ISA).
* `detect_capabilities(device)`: builds that record on this machine (`parse_cpuinfo` reads the
  /proc/cpuinfo text).
* `decide(caps, ...)`: a pure function from the record to the precision, memory format and
  compile choice that pay on that device, each with the reason in words.

The rules (each a measured or documented fast path, never one machine's habit):

* precision: bf16 where the device has bf16 arithmetic: CUDA compute capability >= 8.0
  (A100, A10G, L4, H100) or a CPU flagging avx512_bf16 or amx_bf16 (x86) or bf16 (Arm).
  fp16 with a loss scaler on tensor-core GPUs without bf16 (7.0 <= cc < 8.0: V100, T4),
  unless SAM runs (the scaler cannot see its second gradient). fp32 elsewhere: on a CPU
  without bf16 instructions bf16 is emulated (11x slower than fp32 per step, measured on an
  AVX2 EPYC: bench/precision_auto.py).
* channels_last: where the convolutions it feeds prefer NHWC: tensor-core GPUs in 16-bit, and
  CPUs running native bf16 (oneDNN's bf16 kernels work in NHWC). Not for fp32 (NCHW is the
  fp32 path of cuDNN and of oneDNN on AVX2).
* compile: CUDA GPUs of compute capability >= 7.0, where Inductor emits Triton kernels
  (Triton's minimum). Not on CPUs: Inductor there needs a C++ compiler and pays tens of
  seconds per input shape, a gain nobody measured for these recipes.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

Precision = Literal["bf16", "fp16", "fp32"]

# CPU flags that mean bf16 arithmetic in hardware: x86 AVX-512 BF16 and AMX BF16 tiles
# (/proc/cpuinfo "flags"), Arm's BF16 extension (/proc/cpuinfo "Features", e.g. Graviton3).
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
TENSOR_CORES = (7, 0)  # Volta: fp16 tensor cores; Triton's minimum too
BF16_TENSOR_CORES = (8, 0)  # Ampere: bf16 tensor cores
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class DeviceCapabilities:
    """What a device reports about itself, nothing assumed."""

    kind: Literal["cpu", "cuda"]
    name: str  # the GPU's name, or the CPU's model name
    cuda_capability: tuple[int, int] | None = None  # (major, minor) for a GPU
    cpu_flags: frozenset[str] = field(default_factory=frozenset)
    cpu_isa: str = ""  # torch.backends.cpu.get_cpu_capability(): "AVX2", "AVX512", ...

    @property
    def cpu_bf16(self) -> frozenset[str]:
        """The bf16 instruction flags this CPU reports (empty: bf16 would be emulated)."""
        return self.cpu_flags & CPU_BF16_FLAGS

    def line(self) -> str:
        """One line for logs and benchmark output: the model and what matters about it."""
        if self.kind == "cuda":
            cc = self.cuda_capability
            return f"cuda {self.name} (compute capability {cc[0]}.{cc[1]})" if cc else self.name
        bf16 = ", ".join(sorted(self.cpu_bf16)) or "no avx512_bf16/amx_bf16"
        isa = f"{self.cpu_isa}; " if self.cpu_isa else ""
        return f"cpu {self.name} ({isa}{bf16})"

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "cuda_capability": list(self.cuda_capability) if self.cuda_capability else None,
            "cpu_isa": self.cpu_isa,
            "cpu_bf16_flags": sorted(self.cpu_bf16),
            "cpu_flags": sorted(self.cpu_flags),
        }


@dataclass(frozen=True)
class Choice:
    """One decision: what runs, and why."""

    use: str  # "bf16" / "fp16" / "fp32"; "on" / "off"
    reason: str


@dataclass(frozen=True)
class DeviceDecision:
    precision: Choice
    channels_last: Choice
    compile: Choice


# ------------------------------------------------------------------ decision (pure)
def decide_precision(caps: DeviceCapabilities, *, fp16_ok: bool = True) -> Choice:
    if caps.kind == "cuda":
        cc = caps.cuda_capability or (0, 0)
        at = f"compute capability {cc[0]}.{cc[1]}"
        if cc >= BF16_TENSOR_CORES:
            return Choice("bf16", f"{at} has bf16 tensor cores")
        if cc >= TENSOR_CORES and fp16_ok:
            return Choice("fp16", f"{at} has fp16 tensor cores but no bf16; with a loss scaler")
        if cc >= TENSOR_CORES:
            return Choice("fp32", f"{at} has no bf16, and sam rules out fp16's loss scaler")
        return Choice("fp32", f"{at} has no tensor cores")
    native = sorted(caps.cpu_bf16)
    if native:
        return Choice("bf16", f"the CPU computes bf16 natively ({', '.join(native)})")
    return Choice("fp32", "the CPU has no avx512_bf16/amx_bf16: bf16 would be emulated, slower")


def decide_channels_last(caps: DeviceCapabilities, precision: str) -> Choice:
    if caps.kind == "cuda":
        cc = caps.cuda_capability or (0, 0)
        if precision in ("bf16", "fp16") and cc >= TENSOR_CORES:
            return Choice("on", f"tensor-core convolutions in {precision} prefer NHWC")
        return Choice("off", f"{precision} without tensor cores: NCHW is cuDNN's usual path")
    if precision == "bf16" and caps.cpu_bf16:
        return Choice("on", "oneDNN's native bf16 convolutions work in NHWC")
    return Choice("off", f"{precision} on this CPU: NCHW is oneDNN's usual path")


def decide_compile(caps: DeviceCapabilities) -> Choice:
    if caps.kind == "cuda":
        cc = caps.cuda_capability or (0, 0)
        if cc >= TENSOR_CORES:
            return Choice("on", "Inductor's Triton kernels (compute capability >= 7.0)")
        return Choice("off", "Triton needs compute capability 7.0 or newer")
    return Choice("off", "CPU: compiling costs tens of seconds per shape for an unmeasured gain")


def decide(
    caps: DeviceCapabilities, *, precision: Precision | None = None, fp16_ok: bool = True
) -> DeviceDecision:
    """The fast path on `caps`; `precision` is one already fixed by the recipe (it decides
    the memory format too)."""
    chosen = (
        decide_precision(caps, fp16_ok=fp16_ok)
        if precision is None
        else Choice(precision, "set in the recipe")
    )
    return DeviceDecision(chosen, decide_channels_last(caps, chosen.use), decide_compile(caps))


# ------------------------------------------------------------------ detection
def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in /proc/cpuinfo text (x86 "flags", Arm
    "Features"; Arm names the model in "CPU part" only, as a number)."""
    name = ""
    flags: frozenset[str] = frozenset()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if name and flags:
                break
            continue
        key = key.strip().lower()
        if key in ("model name", "cpu model") and not name:
            name = re.sub(r"\s+", " ", value.strip())
        elif key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
    return name, flags


def cpu_capabilities(cpuinfo: str | None = None, isa: str | None = None) -> DeviceCapabilities:
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text()
        except OSError:
            cpuinfo = ""  # not Linux: no flags known, so no bf16 assumed
    name, flags = parse_cpuinfo(cpuinfo)
    if isa is None:
        import torch  # heavy: only where a run is being set up

        isa = torch.backends.cpu.get_cpu_capability()
    return DeviceCapabilities("cpu", name or platform.processor() or "unknown", None, flags, isa)


@cache
def detect_capabilities(device: str) -> DeviceCapabilities:
    """What `device` ("cpu", "cuda", "cuda:1") reports, read from the machine now."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        return DeviceCapabilities("cuda", torch.cuda.get_device_name(dev), (major, minor))
    return cpu_capabilities()


def capabilities_of(device: torch.device) -> DeviceCapabilities:
    return detect_capabilities(str(device))
