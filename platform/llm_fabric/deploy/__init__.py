"""Kubernetes delivery, assembled: the plan and the site repo in, a site's stacks out, two ways.

Only assembly lives here: the stack inputs and which feature builds which bundle (`build`), the YAML
writer (`render`, `site_renders`), the Pulumi components (`components`) and the check of what was
written against the real schemas (`crd_validation`). Each feature owns its Kubernetes objects in its own
room: `serving` (workloads, probes, weights check, disruption, waves), `gateway.objects`, `observability`
(rules, GPU metrics, dashboards, the canary prober), `quota` (Kueue); `kube` holds what they share.
"""
