"""Optimizers torch does not ship: Muon (with AdamW for the parameters it does not take)."""
