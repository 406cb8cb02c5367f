"""Pure builders: site repo (and plan) in, Kubernetes manifests (plain dicts) out, grouped in bundles."""
