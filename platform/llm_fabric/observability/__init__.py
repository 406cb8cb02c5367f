"""What watches the serving fleet, as Kubernetes objects: Prometheus rules and alerts (`rules`), the GPU
metrics exporter (`gpu_metrics`), a site's Grafana dashboards from its plan (`dashboards/`) and the canary
prober's Deployment and Services (`canary`; the prober itself is `live.prober`)."""
