"""The lab keeps the house's module size: each spotlab module does one job in under 500 lines
(Lab is a facade over facets, lab_*.py; the spot scenarios, their runner and probes apart)."""

from pathlib import Path

LIMIT = 500


def test_every_spotlab_module_is_under_500_lines() -> None:
    folder = Path(__file__).parents[2] / "spotlab"  # read, not imported: moto is slow to load
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.rglob("*.py")}
    assert sizes, folder
    assert {name: n for name, n in sizes.items() if n >= LIMIT} == {}
