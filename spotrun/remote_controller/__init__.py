"""The controller on another host, one feature in one home: `spotrun controller up/status/down`,
the run commands forwarded to it and `pull` (its thin CLI: spotrun.cli.remote and
spotrun.cli.forwarding).

record (SPOTRUN_HOME/remote.json: where the controller lives), connection and ssh_binary (reaching
that host: pinned host key, one shared connection, the system ssh), ssh_probe, lifecycle (up, down),
status, wake (a stopped controller instance started again), forward, pull, and on a controller
instance idle_marks and idle_stop. Above the run API (spotrun.service), which it calls on the host.
"""
