"""Driving one run: the RunController (the run's state machine) and its parts, multi-node steps,
spot recovery, budget checks. The processes that hold runs are spotrun.drive's.
"""
