"""Money as every view shows it: the one rule, so that `cost`, `ls`, `status`, the follow view,
leaderboards, plots and budget lines never disagree about the same amount.

On screen: to the cent, except an amount that is not zero but under a cent, which keeps two
significant digits ($0.0011, never $0.00). Rates per hour keep at least four decimals
($0.3871/h) and as many more as a tiny rate needs to be non-zero.
In JSON and CSV: exact, as unrounded float dollars (fields named `*_usd`), see `exact_usd`.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

UNKNOWN = "?"
_CENT = Decimal("0.01")
_RATE_PLACES = 4  # spot prices are quoted to the ten-thousandth of a dollar
_SMALL_DIGITS = 2  # significant digits kept for an amount under a cent


def _decimal(amount: float | int | Fraction | Decimal) -> Decimal:
    if isinstance(amount, Fraction):
        # enough places for any amount spotrun bills (a second of a $0.0001/h price)
        return Decimal(amount.numerator) / Decimal(amount.denominator)
    if isinstance(amount, float):
        return Decimal(repr(amount))  # 0.3871 stays 0.3871, not its binary neighbour
    return Decimal(amount)


def _sign(value: Decimal, text: str) -> str:
    return f"-${text}" if value < 0 else f"${text}"


def _significant(magnitude: Decimal, digits: int) -> Decimal:
    """`magnitude` (> 0) rounded half up to `digits` significant digits."""
    place = Decimal(1).scaleb(magnitude.adjusted() - digits + 1)
    return magnitude.quantize(place, rounding=ROUND_HALF_UP)


def show_usd(amount: float | int | Fraction | Decimal | None) -> str:
    """An amount for people: $1,234.57, $0.42, $0.0011 (under a cent), $0.00 only for zero."""
    if amount is None:
        return UNKNOWN
    value = _decimal(amount)
    magnitude = abs(value)
    cents = magnitude.quantize(_CENT, rounding=ROUND_HALF_UP)
    if magnitude == 0 or magnitude >= _CENT:
        return _sign(value, f"{cents:,}")
    small = _significant(magnitude, _SMALL_DIGITS)
    if small >= _CENT:  # 0.00996 rounds up to a whole cent
        return _sign(value, f"{_CENT}")
    return _sign(value, f"{small.normalize():f}")  # $0.001, not $0.0010


def show_usd_per_hour(rate: float | int | Fraction | Decimal | None) -> str:
    """A price per hour for people: $0.3871/h, $0.00001/h (a tiny price stays non-zero)."""
    return UNKNOWN if rate is None else show_rate(rate) + "/h"


def show_rate(rate: float | int | Fraction | Decimal) -> str:
    """A price per some unit of time, the unit said by the caller: $0.4400 (per trial-hour)."""
    digits = rate_digits(rate)
    return f"-${digits[1:]}" if digits.startswith("-") else f"${digits}"


def rate_digits(rate: float | int | Fraction | Decimal) -> str:
    """A price per hour's digits, for a column headed $/H: four decimals, more if tiny."""
    value = _decimal(rate)
    magnitude = abs(value)
    shown = magnitude.quantize(Decimal(1).scaleb(-_RATE_PLACES), rounding=ROUND_HALF_UP)
    if shown == 0 and magnitude != 0:
        shown = _significant(magnitude, _SMALL_DIGITS).normalize()
    return f"{'-' if value < 0 else ''}{shown:f}"


def exact_usd(amount: float | int | Fraction | Decimal | None) -> float | None:
    """An amount for JSON and CSV: unrounded dollars, as near as a float holds them."""
    if amount is None:
        return None
    if isinstance(amount, float):
        return amount
    return float(amount)
