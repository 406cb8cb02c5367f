"""The monthly report: the books drawn up from the store's usage figures and what is published of them.

`build` (one month's report from the site repo, the usage figures and Prometheus), `books` (prices
applied to tokens and hardware cost), `month_report` (the report document), `statement` with
`node_history` (the contributor's statement per node), `owner_view` (a contributor's own report),
`render` with `charts` and `templates/` (JSON, CSV, Markdown, HTML), `manifest` and `publish` (the
signed output folder), `exporter` (the report's figures as Prometheus metrics). May import
ledger.store, the site repo and the foundation.
"""
