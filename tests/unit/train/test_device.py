"""What `auto` chooses on each kind of device, from the capabilities the device reports, and a
real training run on this machine that writes the choice made for its own CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spotrun.recipes import get_recipe
from spotrun.train.build import TRACE_FILE, train_recipe
from spotrun.train.device import (
    DeviceCapabilities,
    cpu_capabilities,
    decide,
    detect_capabilities,
    parse_cpuinfo,
)
from spotrun.train.device_record import DEVICE_FILE, DeviceWatch, read_record
from spotrun.train.methods.auto import resolve_methods

# /proc/cpuinfo as these CPUs print it (one processor shown; flags cut to the ones that matter
# plus neighbours, in the kernel's order).
EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model name\t: AMD EPYC 7R13 Processor
flags\t\t: fpu vme de pse tsc msr pae mce cx8 sse sse2 ht syscall nx fma cx16 sse4_1 sse4_2 \
movbe popcnt aes xsave avx f16c rdrand hypervisor bmi1 avx2 smep bmi2 erms sha_ni vaes
bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2

processor\t: 1
model name\t: AMD EPYC 7R13 Processor
flags\t\t: fpu avx2 avx512_bf16
"""
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 \
amx_bf16 amx_tile amx_int8
"""
ZEN4 = """processor\t: 0
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs \
paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU part\t: 0xd40
"""
GRAVITON2 = """processor\t: 0
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm \
lrcpc dcpop asimddp ssbs
CPU part\t: 0xd0c
"""


def cuda(name: str, major: int, minor: int) -> DeviceCapabilities:
    return DeviceCapabilities("cuda", name, (major, minor))


@pytest.mark.parametrize(
    ("text", "name", "bf16"),
    [
        (EPYC_AVX2, "AMD EPYC 7R13 Processor", set()),  # the first processor's flags only
        (SAPPHIRE_RAPIDS, "Intel(R) Xeon(R) Platinum 8488C", {"avx512_bf16", "amx_bf16"}),
        (ZEN4, "AMD EPYC 9R14 96-Core Processor", {"avx512_bf16"}),
        (GRAVITON3, "", {"bf16"}),
        (GRAVITON2, "", set()),
    ],
)
def test_cpuinfo_is_parsed_for_model_and_bf16_flags(text: str, name: str, bf16: set[str]) -> None:
    parsed_name, flags = parse_cpuinfo(text)
    assert parsed_name == name
    caps = cpu_capabilities(text, isa="AVX2")
    assert caps.cpu_bf16 == bf16
    assert "avx2" in flags or "asimd" in flags


@pytest.mark.parametrize(
    ("caps", "precision", "channels_last", "compiled"),
    [
        (cpu_capabilities(EPYC_AVX2, isa="AVX2"), "fp32", "off", "off"),
        (cpu_capabilities(GRAVITON2, isa="DEFAULT"), "fp32", "off", "off"),
        (cpu_capabilities(ZEN4, isa="AVX512"), "bf16", "on", "off"),
        (cpu_capabilities(SAPPHIRE_RAPIDS, isa="AVX512"), "bf16", "on", "off"),
        (cpu_capabilities(GRAVITON3, isa="SVE256"), "bf16", "on", "off"),
        (cuda("Tesla P100-PCIE-16GB", 6, 0), "fp32", "off", "off"),
        (cuda("Tesla V100-SXM2-16GB", 7, 0), "fp16", "on", "on"),
        (cuda("Tesla T4", 7, 5), "fp16", "on", "on"),
        (cuda("NVIDIA A100-SXM4-40GB", 8, 0), "bf16", "on", "on"),
        (cuda("NVIDIA A10G", 8, 6), "bf16", "on", "on"),
        (cuda("NVIDIA L4", 8, 9), "bf16", "on", "on"),
        (cuda("NVIDIA H100 80GB HBM3", 9, 0), "bf16", "on", "on"),
    ],
)
def test_decision_table(
    caps: DeviceCapabilities, precision: str, channels_last: str, compiled: str
) -> None:
    decision = decide(caps)
    assert (decision.precision.use, decision.channels_last.use, decision.compile.use) == (
        precision,
        channels_last,
        compiled,
    )
    assert all(c.reason for c in (decision.precision, decision.channels_last, decision.compile))


def test_sam_keeps_fp16_gpus_in_fp32() -> None:
    t4 = cuda("Tesla T4", 7, 5)
    resolved = resolve_methods({"sam": {}, "mixed_precision": {"precision": "auto"}}, t4)
    assert resolved.methods["mixed_precision"] == {"precision": "fp32"}
    assert "sam" in resolved.choices[0].reason
    a10g = cuda("NVIDIA A10G", 8, 6)
    resolved = resolve_methods({"sam": {}, "mixed_precision": {}}, a10g)
    assert resolved.methods["mixed_precision"] == {"precision": "bf16"}


def test_explicit_choices_win_and_auto_ones_resolve() -> None:
    avx2 = cpu_capabilities(EPYC_AVX2, isa="AVX2")
    recipe = {
        "mixed_precision": {"precision": "bf16", "eval": False},
        "channels_last": {"when": "always"},
        "compile": {"when": "auto", "backend": "eager"},
        "ema": {},
    }
    resolved = resolve_methods(recipe, avx2)
    assert resolved.methods == {
        "mixed_precision": {"precision": "bf16", "eval": False},
        "channels_last": {"when": "always"},
        "ema": {},
    }
    mp, cl, comp = resolved.choices
    assert (mp.asked, mp.use) == ("bf16", "bf16") and "emulates bf16" in mp.reason
    assert (cl.asked, cl.use, cl.reason) == ("always", "on", "set in the recipe")
    assert (comp.asked, comp.use) == ("auto", "off")
    # the recipe's own mapping is left alone
    assert recipe["compile"] == {"when": "auto", "backend": "eager"}

    h100 = resolve_methods(recipe | {"mixed_precision": {}}, cuda("NVIDIA H100", 9, 0))
    assert h100.methods["mixed_precision"] == {"precision": "bf16"}
    assert h100.methods["compile"] == {"when": "always", "backend": "eager"}

    bare = resolve_methods({"ema": {}}, avx2)
    assert [(c.method, c.use, c.asked) for c in bare.choices] == [
        ("mixed_precision", "fp32", "not in the recipe"),
        ("channels_last", "off", "not in the recipe"),
        ("compile", "off", "not in the recipe"),
    ]


def test_this_machine_is_read_not_assumed() -> None:
    caps = detect_capabilities("cpu")
    assert caps.kind == "cpu" and caps.name
    assert caps.cpu_isa == torch.backends.cpu.get_cpu_capability()
    if Path("/proc/cpuinfo").exists():
        assert caps.cpu_flags  # a Linux CPU always reports some


def _flags_of_this_cpu() -> set[str]:
    """This machine's first 'flags'/'Features' line, read plainly (not through the parser)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.lower().startswith(("flags", "features")):
            return set(line.split(":", 1)[1].split())
    return set()


def test_recipe_with_auto_trains_at_the_precision_this_cpu_computes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = get_recipe(
        "digits-fast",
        [
            "epochs=1",
            "threads=1",
            'methods.mixed_precision={"precision": "auto"}',
            'methods.channels_last={"when": "auto"}',
        ],
    )
    train_recipe(recipe, tmp_path)
    native = _flags_of_this_cpu() & {"avx512_bf16", "amx_bf16", "bf16"}
    want = "bf16" if native else "fp32"
    record = read_record(tmp_path)
    assert record is not None
    choices = {c["method"]: c for c in record.choices}
    assert choices["mixed_precision"]["use"] == want
    assert choices["mixed_precision"]["asked"] == "auto"
    assert choices["channels_last"]["use"] == ("on" if native else "off")
    assert record.capabilities["cpu_bf16_flags"] == sorted(native)
    assert f"device {record.line()}" in capsys.readouterr().out
    # what ran: autocast at every forward pass only if bf16 was chosen
    trace = json.loads((tmp_path / TRACE_FILE).read_text())
    autocast = [
        r for r in trace if (r["algorithm"], r["event"]) == ("mixed_precision", "before_forward")
    ]
    assert bool(autocast) == bool(native)
    # the controller's watch turns the record into one event, once
    watch = DeviceWatch(tmp_path)
    assert watch.poll() == [record.line()] and watch.poll() == []
    assert DeviceWatch(tmp_path).poll() == []  # a controller that comes back: told already
    assert (tmp_path / DEVICE_FILE).exists()
