"""The leaf layer: errors, waiting, configuration, run states, exit codes, the job spec.

Nothing here imports another spotrun layer.
"""
