"""What a run runs: your own command, task files, the workdir that ships with it."""
