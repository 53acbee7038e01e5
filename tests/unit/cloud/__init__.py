"""Unit tests of spotrun.cloud."""
