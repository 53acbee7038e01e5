"""The methods catalog is listed by kind (catalog_model, catalog_batch, catalog_optimization) and
put in application order in catalog.py: a method added to a kind but not to the order, or to
two kinds, would silently leave the catalog."""

from __future__ import annotations

from collections import Counter

from spotrun.train.methods.catalog import APPLICATION_ORDER, CATALOG
from spotrun.train.methods.catalog_batch import BATCH_METHODS
from spotrun.train.methods.catalog_model import MODEL_METHODS
from spotrun.train.methods.catalog_optimization import OPTIMIZATION_METHODS


def test_every_method_of_every_kind_is_in_the_order_once() -> None:
    listed = Counter(m.name for m in (*MODEL_METHODS, *BATCH_METHODS, *OPTIMIZATION_METHODS))
    assert [name for name, times in listed.items() if times > 1] == []
    assert Counter(APPLICATION_ORDER) == Counter(set(APPLICATION_ORDER))  # no name twice
    assert sorted(APPLICATION_ORDER) == sorted(listed)
    assert [m.name for m in CATALOG] == list(APPLICATION_ORDER)
