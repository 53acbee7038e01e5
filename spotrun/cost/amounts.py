"""Exact dollar amounts: a Fraction of a dollar from a price as given, rounded to the cent only
for display; and the times bills are stated in (whole seconds, UTC)."""

from __future__ import annotations

import math
import time
from decimal import Decimal
from fractions import Fraction

from spotrun.core.errors import PricingError
from spotrun.core.money import show_usd

HOUR_S = 3600  # prices are per hour, times in seconds


def usd(value: float | int | str | Fraction) -> Fraction:
    """An exact amount from a price as given: a float by its shortest repr (0.3871 stays 0.3871)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PricingError(f"a price must be a finite number, got {value}")
        return Fraction(repr(value))
    return Fraction(value)


def to_cents(amount: Fraction) -> Decimal:
    """Rounded half up to the cent (what a bill of whole cents would say)."""
    cents = math.floor(amount * 100 + Fraction(1, 2))
    return Decimal(cents).scaleb(-2)


def format_usd(amount: Fraction) -> str:
    """An exact amount for people, by the one rule of spotrun/core/money.py."""
    return show_usd(amount)


def whole_second(at: float) -> int:
    """EC2 reports times to the second; a local clock's fraction rounds to the nearest one."""
    return math.floor(at + 0.5)


def iso_utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
