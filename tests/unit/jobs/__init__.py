"""Unit tests of spotrun.jobs."""
