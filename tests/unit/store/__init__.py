"""Unit tests of spotrun.store."""
