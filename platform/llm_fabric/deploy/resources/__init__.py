"""Pure builders: site repo (and plan) in, Kubernetes manifests (plain dicts) out, grouped in bundles.

One module per concern (serving, allocations, gateway, observability, gpu_metrics; dashboards/, a
site's Grafana dashboards from its plan), fed the same
dicts by `fabric render` and the Pulumi components. They take a `trust.sites.TrustedSite`, never a plain
site repo. May import plan, gateway (config time), engine, policies, trust, site, hardware and the
foundation; nothing of cli, nodes or ledger.
"""
