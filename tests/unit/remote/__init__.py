"""Unit tests of spotrun.remote."""
