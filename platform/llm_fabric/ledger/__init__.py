"""Usage ledgers and the federation's monthly report.

`store/` takes the request records in and keeps them (DuckDB, rollups, usage figures); `report/` draws
up the books and publishes the month's report from them; `report_keys` loads the keys reports are
signed with. May import site, signing and the foundation.

Invariants of the books (every module in this package keeps them):

- Natural keys. A usage row is keyed by (month, deployment, tenant); a day row by (month,
  deployment, day); a contributor row by (month, owner); a statement row by (month, node). A
  request is identified by its `request_id` (on its day) when the log carries one, else by its
  content: the same request exported or ingested twice counts once (llm_fabric.ledger.store.records,
  .database). Engine counters are keyed by their Prometheus series (model and replica labels), never by scrape.
- Integer token units. Tokens are counted as integers (BIGINT in the store and its rollups, Python int in
  the books), never as floats; counter deltas from Prometheus are rounded once, per series, when they are read.
- Prices are applied at report time. Records and counters hold tokens only; `ledger.yaml`'s
  prices are multiplied in when the books are drawn up, with Decimal arithmetic, rounded to cents
  only for display. Changing a price and re-running a month re-prices it; nothing stored goes stale.
- Re-running a month gives the same books. The report is a pure function of (site repo, month,
  the ledger store's records or the given record files, Prometheus data): the store holds records
  and rollups that are functions of them, never figures of a report; every table is sorted by its
  key, and the only field that changes between runs with the same inputs is `generated_at`.
- Missing data is stated, never filled: days and models without data are listed in the report.
"""
