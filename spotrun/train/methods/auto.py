"""`auto` in a recipe's methods, made concrete for the device the run is on.

mixed_precision (precision=auto), channels_last and compile (when=auto) are decided by
spotrun.train.device from the device's capabilities; an explicit setting (precision=bf16,
when=always, or the method left out) always wins. `resolve_methods` is pure: it takes the
capabilities record, so every device's outcome is testable on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from spotrun.train.device import Choice, DeviceCapabilities, Precision, PrecisionProbe, decide

DEVICE_AWARE = ("mixed_precision", "channels_last", "compile")


@dataclass(frozen=True)
class MethodChoice:
    """What the recipe asked of one device-aware method and what the run does."""

    method: str
    asked: str  # "auto", "bf16", "always", "not in the recipe", ...
    use: str  # "bf16" / "fp16" / "fp32"; "on" / "off"
    reason: str

    def line(self) -> str:
        return f"{self.method} {self.use} ({self.reason})"

    def to_dict(self) -> dict[str, str]:
        return {"method": self.method, "asked": self.asked, "use": self.use, "reason": self.reason}


@dataclass(frozen=True)
class ResolvedMethods:
    methods: dict[str, dict[str, Any] | None]  # concrete: no "auto" left
    choices: list[MethodChoice]
    probe: PrecisionProbe | None = None  # what bf16 and fp32 measured, where that decided


def precision_asked(methods: Mapping[str, Mapping[str, Any] | None]) -> str:
    """The recipe's mixed_precision setting: "auto", "bf16", ... or "not in the recipe"."""
    mp = methods.get("mixed_precision")
    return str(mp.get("precision", "auto")) if mp is not None else "not in the recipe"


def resolve_methods(
    methods: Mapping[str, Mapping[str, Any] | None],
    caps: DeviceCapabilities,
    probe: PrecisionProbe | None = None,
) -> ResolvedMethods:
    """`probe`: bf16 against fp32 timed on this CPU (decides precision=auto where given)."""
    out: dict[str, dict[str, Any] | None] = {
        k: dict(v) if v is not None else None for k, v in methods.items()
    }
    mp = out.get("mixed_precision")
    asked = precision_asked(methods)
    fixed = None if asked == "auto" else cast(Precision, asked)
    if mp is None:
        fixed = "fp32"
    if fixed is not None:
        probe = None  # measured or not, it decided nothing
    decision = decide(caps, precision=fixed, fp16_ok="sam" not in methods, probe=probe)
    precision = decision.precision
    if mp is None:
        precision = Choice("fp32", "not in the recipe")
    else:
        mp["precision"] = precision.use
        if precision.use == "bf16" and asked == "bf16" and caps.kind == "cpu" and not caps.cpu_bf16:
            precision = Choice("bf16", "set in the recipe; this CPU emulates bf16: slower")
    choices = [MethodChoice("mixed_precision", asked, precision.use, precision.reason)]
    for name, auto in (("channels_last", decision.channels_last), ("compile", decision.compile)):
        choices.append(_when(out, name, auto))
    return ResolvedMethods(out, choices, probe)


def _when(out: dict[str, dict[str, Any] | None], name: str, auto: Choice) -> MethodChoice:
    """Resolve a when=auto|always method in `out` (dropped where auto says off)."""
    if name not in out:
        return MethodChoice(name, "not in the recipe", "off", "not in the recipe")
    options = out[name] or {}
    asked = str(options.get("when", "auto"))
    if asked == "always":
        return MethodChoice(name, asked, "on", "set in the recipe")
    if auto.use == "on":
        out[name] = {**options, "when": "always"}
    else:
        del out[name]
    return MethodChoice(name, asked, auto.use, auto.reason)


def resolve_one(name: str, options: Mapping[str, Any], caps: DeviceCapabilities) -> MethodChoice:
    """One method's choice alone (an Algorithm built outside a recipe, given auto)."""
    choices = resolve_methods({name: options}, caps).choices
    return next(c for c in choices if c.method == name)
