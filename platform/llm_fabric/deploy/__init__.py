"""Kubernetes delivery: the plan and the site repo in, Kubernetes resources out, two ways.

Holds the resource builders (`resources/`), the stack inputs (`build`, `options`, `sites`), the YAML
writer (`render`), the Pulumi components (`components`), labels and manifest checks (`manifests`,
`crd_validation`). May import plan, policies, site and the foundation; never enrollment or nodes.
"""
