"""What runs on the instance (and on this machine for the local cloud): the job's tmux session,
the job wrapper that records its output and exit code. Imports stay light: no torch, no boto3."""
