"""The spotrun command: one module per command group. No cloud SDKs here."""
