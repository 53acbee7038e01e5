"""Unit tests of spotrun.cost."""
