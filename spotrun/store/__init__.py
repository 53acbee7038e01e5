"""The ledger: SQLite under SPOTRUN_HOME, its schema and migrations, one module per table group."""
