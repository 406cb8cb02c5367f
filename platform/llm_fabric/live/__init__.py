"""Checks of the running fabric against its plan: `fabric check live` and `fabric canary`.

`drift` asks every replica's engine, through its backend's `reported_config`, for the configuration it
runs with and sets it beside the plan's configuration fingerprint. `canary` sends the recipe's canary
prompts to every replica and judges the answers (signals, the recorded reference, the siblings);
`prober` runs it continuously and serves the verdicts and the gateway's rotation. May import plan,
engine, trust, site, deploy and the foundation; nothing imports it but the CLI.
"""
