"""From the site repo to Kubernetes resources: placement, resource builders, Pulumi components."""
