"""Driving instances from the controller: runners (local, SSH), the job in tmux, file sync."""
