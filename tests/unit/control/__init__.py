"""Unit tests of spotrun.control."""
