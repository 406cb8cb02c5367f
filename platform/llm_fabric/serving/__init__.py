"""The serving fleet's Kubernetes face: a replica's workload (`workloads`: Deployment or LeaderWorkerSet,
Services, PriorityClasses, NetworkPolicy, PodMonitor), its probes (`probes`), the weights check before the
engine starts (`weights`), the PodDisruptionBudget (`disruption`) and a rollout's order in waves (`waves`).
Pure builders: a `trust.sites.TrustedSite` and the plan in, manifests (plain dicts) out.
"""
