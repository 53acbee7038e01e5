"""Unit tests of spotrun.launch."""
