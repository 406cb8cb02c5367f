"""Key handling and the trust gate: what the fabric's keys sign and which node manifests may be used.

`signatures` the Ed25519 keys, manifest and endorsement signatures; `root` the keys a change is judged
by (keys/, a base revision, a keyring) and adding a key; `sites` the trust gate, `TrustedSite`, the only
site type plan, render, the stacks, the gateway config and provisioning accept; `report_keys` the keys
that sign and read a month report. Imports only the site repo and the foundation.
"""
