"""Quota: the Kueue objects that give each contributor its dedicated allocation and the pool its share
(`allocations`: ResourceFlavors, ClusterQueues in a cohort, LocalQueues)."""
