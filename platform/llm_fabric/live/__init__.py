"""Checks of the running fabric against its plan: `fabric check live` (drift: what each engine reports).

`drift` asks every replica's engine, through its backend's `reported_config`, for the configuration it
runs with and sets it beside the plan's configuration fingerprint. May import plan, engine, trust,
site and the foundation; nothing imports it but the CLI.
"""
