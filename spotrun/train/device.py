"""What the device a run lands on computes fast, read at run time, and what that decides.

Three parts, kept apart so that the decision is testable without the hardware:

* `DeviceCapabilities`: a typed record of what the device reports (a GPU's name and compute
  capability; a CPU's model, its /proc/cpuinfo flags and torch's vector ISA).
* `detect_capabilities(device)`: builds that record on this machine (`parse_cpuinfo` reads the
  /proc/cpuinfo text).
* `decide(caps, ...)`: a pure function from the record to the precision, memory format and
  compile choice that pay on that device, each with the reason in words.

The rules (each a measured or documented fast path, never one machine's habit):

* precision on GPUs: bf16 at CUDA compute capability >= 8.0 (A100, A10G, L4, H100); fp16 with
  a loss scaler on tensor-core GPUs without bf16 (7.0 <= cc < 8.0: V100, T4), unless SAM runs
  (the scaler cannot see its second gradient); fp32 elsewhere.
* precision on CPUs: fp32 without bf16 instructions (bf16 is emulated there: 8-11x slower per
  step on an AVX2 EPYC). With them (avx512_bf16, amx_bf16, Arm bf16) bf16 only where it was
  measured faster on this CPU: the flags do not say it (an Intel Xeon with AVX512_BF16 and no
  AMX ran cifar10-fast 1.24x slower in bf16 than in fp32 + channels_last), so the trainer
  times the run's model in both (`precision_probe`) and hands the figures in. Without a
  measurement: bf16 with AMX tiles (oneDNN's AMX kernels), fp32 otherwise.
* channels_last: tensor-core GPUs in 16-bit; x86 CPUs in fp32 and bf16 (NHWC measured faster
  in fp32 on both x86 kinds we ran: 0.71x NCHW's step on the AVX-512 Xeon, 0.89x on the AVX2
  EPYC; oneDNN's bf16 convolutions work in NHWC). Not on GPUs in fp32 (NCHW is cuDNN's fp32
  path) nor on CPUs we have not measured (Arm) in fp32.
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
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

Precision = Literal["bf16", "fp16", "fp32"]

# CPU flags that mean bf16 arithmetic in hardware: x86 AVX-512 BF16 and AMX BF16 tiles
# (/proc/cpuinfo "flags"), Arm's BF16 extension (/proc/cpuinfo "Features", e.g. Graviton3).
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
TENSOR_CORES = (7, 0)  # Volta: fp16 tensor cores; Triton's minimum too
BF16_TENSOR_CORES = (8, 0)  # Ampere: bf16 tensor cores
CPUINFO = Path("/proc/cpuinfo")
X86_VECTOR_FLAGS = frozenset({"avx2", "avx512f"})  # the x86 CPUs whose NHWC we measured
# bf16 is taken on a CPU only if its step takes at most this share of fp32's: a clear win, so
# that the noise of a busy machine does not flip the choice between two runs of one recipe.
BF16_MARGIN = 0.85


@dataclass(frozen=True)
class PrecisionProbe:
    """Median seconds of one training step in each precision, measured on this device
    (spotrun.train.precision_probe)."""

    fp32_s: float
    bf16_s: float
    images: int

    @property
    def bf16_wins(self) -> bool:
        return self.bf16_s <= BF16_MARGIN * self.fp32_s

    def line(self) -> str:
        return (
            f"measured here: bf16 {self.bf16_s * 1000:.0f} ms vs fp32 {self.fp32_s * 1000:.0f} "
            f"ms a step of {self.images} images"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"fp32_s": self.fp32_s, "bf16_s": self.bf16_s, "images": self.images}

    @classmethod
    def from_dict(cls, data: object) -> PrecisionProbe | None:
        """The probe a device record kept, or None if it holds none."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(float(data["fp32_s"]), float(data["bf16_s"]), int(data["images"]))
        except (KeyError, TypeError, ValueError):
            return None


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
def decide_precision(
    caps: DeviceCapabilities, *, fp16_ok: bool = True, probe: PrecisionProbe | None = None
) -> Choice:
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
    native = ", ".join(sorted(caps.cpu_bf16))
    if not native:
        return Choice("fp32", "the CPU has no avx512_bf16/amx_bf16: bf16 would be emulated, slower")
    if probe is not None and probe.bf16_wins:
        return Choice("bf16", f"the CPU computes bf16 ({native}) and it is faster: {probe.line()}")
    if probe is not None:
        return Choice("fp32", f"the CPU has {native} but bf16 is not faster: {probe.line()}")
    if "amx_bf16" in caps.cpu_bf16:
        return Choice("bf16", "AMX bf16 tiles (oneDNN's AMX kernels); not measured on this CPU")
    return Choice("fp32", f"the CPU has {native}, not measured faster than fp32 here")


def decide_channels_last(caps: DeviceCapabilities, precision: str) -> Choice:
    if caps.kind == "cuda":
        cc = caps.cuda_capability or (0, 0)
        if precision in ("bf16", "fp16") and cc >= TENSOR_CORES:
            return Choice("on", f"tensor-core convolutions in {precision} prefer NHWC")
        return Choice("off", f"{precision} without tensor cores: NCHW is cuDNN's usual path")
    if precision == "bf16" and caps.cpu_bf16:
        return Choice("on", "oneDNN's native bf16 convolutions work in NHWC")
    if precision == "fp32" and caps.cpu_flags & X86_VECTOR_FLAGS:
        return Choice("on", "fp32 NHWC convolutions measured faster on x86 CPUs (0.71-0.89x NCHW)")
    return Choice("off", f"{precision} on this CPU kind: NHWC not measured, NCHW kept")


def decide_compile(caps: DeviceCapabilities) -> Choice:
    if caps.kind == "cuda":
        cc = caps.cuda_capability or (0, 0)
        if cc >= TENSOR_CORES:
            return Choice("on", "Inductor's Triton kernels (compute capability >= 7.0)")
        return Choice("off", "Triton needs compute capability 7.0 or newer")
    return Choice("off", "CPU: compiling costs tens of seconds per shape for an unmeasured gain")


def decide(
    caps: DeviceCapabilities,
    *,
    precision: Precision | None = None,
    fp16_ok: bool = True,
    probe: PrecisionProbe | None = None,
) -> DeviceDecision:
    """The fast path on `caps`; `precision` is one already fixed by the recipe (it decides
    the memory format too); `probe` what bf16 and fp32 measured on this CPU, if timed."""
    chosen = (
        decide_precision(caps, fp16_ok=fp16_ok, probe=probe)
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
    import torch  # ~0.7 s: only where a run is being set up

    dev = torch.device(device)
    if dev.type == "cuda":
        major, minor = torch.cuda.get_device_capability(dev)
        return DeviceCapabilities("cuda", torch.cuda.get_device_name(dev), (major, minor))
    return cpu_capabilities()


def wants_probe(caps: DeviceCapabilities) -> bool:
    """Whether `auto` precision on this device is decided by timing bf16 against fp32: a CPU
    with bf16 instructions (elsewhere the capabilities alone decide)."""
    return caps.kind == "cpu" and bool(caps.cpu_bf16)


def capabilities_of(device: torch.device) -> DeviceCapabilities:
    return detect_capabilities(str(device))
