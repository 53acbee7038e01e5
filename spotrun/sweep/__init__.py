"""Sweeps: many trials of a recipe in parallel, early stopping, a leaderboard with cost."""
