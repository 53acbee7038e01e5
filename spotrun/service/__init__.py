"""The library surface the CLI calls, and scripts can: runs (launch, status, stop, cost), sweeps,
datasets."""
