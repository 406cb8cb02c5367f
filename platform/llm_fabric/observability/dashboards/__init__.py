"""The Grafana dashboards of a site, generated from its plan with the Grafana Foundation SDK.

`series` names every metric a panel reads and who exports it (the engines, LiteLLM, dcgm-exporter,
the fabric itself); `panels` holds the panel and dashboard specs and turns them into Grafana's JSON
with the SDK's builders; `site_set` makes a site's four dashboards (deployments, tenants, nodes,
gateway) from its plan and wraps each in a ConfigMap for the Grafana sidecar.

Why the Grafana Foundation SDK and not grafanalib: it is Grafana's own, generated from the same
schemas (cog) Grafana's dashboard model is defined in, so a panel or field it offers is one the
Grafana release it targets knows; it is typed (mypy checks the builders' calls) and maintained with
every Grafana release, where grafanalib is a community project whose model lags Grafana's and is
checked only at run time.
"""
