"""The library surface the CLI calls (spotrun.api re-exports it)."""
