"""What `auto` chooses on each kind of device, from the capabilities the device reports, and a
real training run on this machine that writes the choice made for its own CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from spotrun.core.rundir import DEVICE_FILE, TRACE_FILE
from spotrun.recipes import get_recipe
from spotrun.train.build import train_recipe
from spotrun.train.device import (
    DeviceCapabilities,
    PrecisionProbe,
    cpu_capabilities,
    decide,
    detect_capabilities,
    parse_cpuinfo,
)
from spotrun.train.device_record import DeviceWatch, read_record
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
        # x86: NHWC in fp32 too (measured faster on an AVX2 EPYC and an AVX-512 Xeon)
        (cpu_capabilities(EPYC_AVX2, isa="AVX2"), "fp32", "on", "off"),
        (cpu_capabilities(GRAVITON2, isa="DEFAULT"), "fp32", "off", "off"),
        # bf16 instructions without a measurement: fp32, except with AMX tiles
        (cpu_capabilities(ZEN4, isa="AVX512"), "fp32", "on", "off"),
        (cpu_capabilities(SAPPHIRE_RAPIDS, isa="AVX512"), "bf16", "on", "off"),
        (cpu_capabilities(GRAVITON3, isa="SVE256"), "fp32", "off", "off"),
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


FASTER_BF16 = PrecisionProbe(fp32_s=0.40, bf16_s=0.10, images=32)  # a Zen 5's kind of figure
SLOWER_BF16 = PrecisionProbe(fp32_s=0.110, bf16_s=0.136, images=32)  # the AVX-512 Xeon's
NOT_CLEARLY = PrecisionProbe(fp32_s=0.100, bf16_s=0.090, images=32)  # within the noise


@pytest.mark.parametrize(
    ("cpuinfo", "probe", "precision", "channels_last"),
    [
        (ZEN4, FASTER_BF16, "bf16", "on"),
        (ZEN4, SLOWER_BF16, "fp32", "on"),
        (ZEN4, NOT_CLEARLY, "fp32", "on"),
        (SAPPHIRE_RAPIDS, SLOWER_BF16, "fp32", "on"),  # measured beats documented
        (GRAVITON3, FASTER_BF16, "bf16", "on"),
        (GRAVITON3, SLOWER_BF16, "fp32", "off"),
        (EPYC_AVX2, FASTER_BF16, "fp32", "on"),  # no bf16 instructions: never measured
    ],
)
def test_a_cpu_with_bf16_instructions_takes_bf16_only_where_it_measured_faster(
    cpuinfo: str, probe: PrecisionProbe, precision: str, channels_last: str
) -> None:
    decision = decide(cpu_capabilities(cpuinfo, isa="AVX512"), probe=probe)
    assert (decision.precision.use, decision.channels_last.use) == (precision, channels_last)
    if cpuinfo is not EPYC_AVX2:
        assert "measured here" in decision.precision.reason  # the figures are in the reason
    # a precision the recipe fixed is not second-guessed by a measurement
    fixed = resolve_methods(
        {"mixed_precision": {"precision": "bf16"}}, cpu_capabilities(cpuinfo), SLOWER_BF16
    )
    assert fixed.methods["mixed_precision"] == {"precision": "bf16"} and fixed.probe is None


def test_a_probe_round_trips_and_a_damaged_one_is_none() -> None:
    assert PrecisionProbe.from_dict(SLOWER_BF16.to_dict()) == SLOWER_BF16
    assert PrecisionProbe.from_dict({"fp32_s": "x"}) is None
    assert PrecisionProbe.from_dict(None) is None


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
    recipe_sets = [
        'methods.mixed_precision={"precision": "auto"}',
        'methods.channels_last={"when": "auto"}',
    ]
    recipe = get_recipe("digits-fast", ["epochs=1", "threads=1", *recipe_sets])
    train_recipe(recipe, tmp_path)
    flags = _flags_of_this_cpu()
    native = flags & {"avx512_bf16", "amx_bf16", "bf16"}
    record = read_record(tmp_path)
    assert record is not None
    probe = PrecisionProbe.from_dict(record.probe)
    if not native:
        want, reason = "fp32", "emulated"
        assert probe is None  # nothing to measure: the flags decide
    else:
        # a CPU with bf16 instructions times the recipe's model in both before training
        assert probe is not None and probe.fp32_s > 0 and probe.bf16_s > 0
        want = "bf16" if probe.bf16_s <= 0.85 * probe.fp32_s else "fp32"
        reason = "measured here"
    choices = {c["method"]: c for c in record.choices}
    assert choices["mixed_precision"]["use"] == want
    assert reason in choices["mixed_precision"]["reason"]
    assert choices["mixed_precision"]["asked"] == "auto"
    x86 = bool(flags & {"avx2", "avx512f"})
    assert choices["channels_last"]["use"] == ("on" if want == "bf16" or x86 else "off")
    assert record.capabilities["cpu_bf16_flags"] == sorted(native)
    assert f"device {record.line()}" in capsys.readouterr().out
    # what ran: autocast at every forward pass only if bf16 was chosen
    trace = json.loads((tmp_path / TRACE_FILE).read_text())
    autocast = [
        r for r in trace if (r["algorithm"], r["event"]) == ("mixed_precision", "before_forward")
    ]
    assert bool(autocast) == (want == "bf16")
    # the controller's watch turns the record into one event, once
    watch = DeviceWatch(tmp_path)
    assert watch.poll() == [record.line()] and watch.poll() == []
    assert DeviceWatch(tmp_path).poll() == []  # a controller that comes back: told already
    assert (tmp_path / DEVICE_FILE).exists()
    # a resume on this device keeps the measured choice (no second, perhaps other, verdict)
    again = get_recipe("digits-fast", ["epochs=2", "threads=1", *recipe_sets])
    train_recipe(again, tmp_path)
    resumed = read_record(tmp_path)
    assert resumed is not None and resumed.probe == record.probe
    assert resumed.choices == record.choices


def test_the_probe_times_both_precisions_and_leaves_the_random_state_alone() -> None:
    from spotrun.train.models import build_model
    from spotrun.train.precision_probe import probe_cpu_precision

    torch.manual_seed(123)
    before = torch.get_rng_state()
    probe = probe_cpu_precision(
        lambda: build_model("digits-net", 10, width=8),
        (1, 8, 8),
        fp32_channels_last=True,
        images=8,
        rounds=2,
    )
    assert probe.images == 8 and probe.fp32_s > 0 and probe.bf16_s > 0
    assert torch.equal(torch.get_rng_state(), before)  # the run's initial weights do not move
