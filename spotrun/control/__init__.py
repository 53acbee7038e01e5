"""Driving runs: the controller, multi-node steps, spot recovery, the supervisor process,
budget checks.
"""
