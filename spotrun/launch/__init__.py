"""Preparing a launch: planning offers for a job."""
