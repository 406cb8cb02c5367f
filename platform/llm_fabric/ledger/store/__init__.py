"""Records in: the request-record files the ledger reads, the DuckDB store that keeps them, and the usage
figures drawn from it.

`records` (record formats, which statuses are a success), `sources` (readers of record files and LiteLLM exports),
`database` (the store and its ingest), `rollups` (sums kept beside the records), `usage` (a month's
figures from records or rollups), `engine_usage` and `promapi` (engine counters from Prometheus),
`period` (months and days). May import the site repo's models (ledger.yaml names the store) and the
foundation; the report package builds on it, never the other way round (import-linter keeps that).
"""
