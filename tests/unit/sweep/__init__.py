"""Unit tests of spotrun.sweep."""
