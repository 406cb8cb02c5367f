"""Checks of the running fabric against its plan: `fabric check live` (drift: what each engine reports)."""
