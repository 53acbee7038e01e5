"""Tests of the lab itself (the lab is the top-level spotlab package)."""
