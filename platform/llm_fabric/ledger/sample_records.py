"""Sample request records for a month (`fabric ledger sample`), in the format the gateway's meter writes.

Prompt lengths follow each deployment's declared context profile (p50/p95 in deployments/*.yaml):
length = p50 x (p95/p50)^((u - 0.5) / 0.45) for a hash-uniform u, so the generated p50 and p95
land on the declared ones. Output is about 1/17 of the input (seed 000), cache hits about half.
Randomness comes from DuckDB's `hash` of the row number shifted by the seed, not from a random
generator: same arguments, same file. DuckDB writes them because a month is millions of rows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import duckdb

from llm_fabric.errors import UsageError
from llm_fabric.ledger.store.period import Month
from llm_fabric.site.loader import SiteRepo

SEED_STRIDE = 1 << 32  # row numbers of different seeds never overlap below 4 Gi rows


def generate_records(
    path: Path,
    month: Month,
    count: int,
    profiles: Mapping[str, tuple[int, int]],
    tenants: Sequence[str],
    *,
    skip_days: Sequence[int] = (),
    request_ids: bool = False,
    id_prefix: str = "req-",
    seed: int = 0,
) -> None:
    """Write `count` records spread evenly over the month to `path` (.parquet or .jsonl); with
    `request_ids`, each has a distinct `request_id` (`id_prefix` + row number, as the meter writes them)."""
    models = sorted(profiles)
    model_list = "[" + ", ".join(f"'{m}'" for m in models) + "]"
    p50s = "[" + ", ".join(str(profiles[m][0]) for m in models) + "]"
    p95s = "[" + ", ".join(str(profiles[m][1]) for m in models) + "]"
    tenant_list = "[" + ", ".join(f"'{t}'" for t in tenants) + "]"
    seconds = int((month.end - month.start).total_seconds())
    skip = "[" + ", ".join(str(d) for d in skip_days) + "]" if skip_days else "[]::INTEGER[]"
    prefix = id_prefix.replace("'", "''")
    ids = f", '{prefix}' || i AS request_id" if request_ids else ""
    shift = seed * SEED_STRIDE
    query = f"""
    WITH base AS (
        SELECT i,
               (hash(i * 3 + 1 + {shift}) % 1000000) / 1000000.0 AS u,
               (hash(i * 3 + 2 + {shift}) % 1000000) / 1000000.0 AS v,
               (1 + hash(i * 3 + {shift}) % {len(models)})::BIGINT AS m,
               TIMESTAMP '{month.start:%Y-%m-%d} 00:00:00' + to_seconds(i * {seconds} // {count}) AS ts
        FROM range({count}) t(i)
    ), shaped AS (
        SELECT i, ts, {model_list}[m] AS model,
               {tenant_list}[(1 + hash(i * 7 + 5 + {shift}) % {len(tenants)})::BIGINT] AS tenant,
               greatest(16, round({p50s}[m] * pow({p95s}[m] / {p50s}[m], (u - 0.5) / 0.45)))::BIGINT AS prompt_tokens,
               v
        FROM base WHERE NOT list_contains({skip}, day(ts))
    )
    SELECT ts, model, tenant, prompt_tokens,
           greatest(1, round(prompt_tokens / 17.0 * (0.5 + v)))::BIGINT AS completion_tokens,
           round(prompt_tokens * v * 0.9)::BIGINT AS cached_prompt_tokens,
           round(150 + 400 * v)::DOUBLE AS ttft_ms,
           CASE WHEN v < 0.004 THEN '500' ELSE '200' END AS status{ids}
    FROM shaped
    """
    # written beside the target and renamed: a reader never sees half a month
    partial = path.with_name(f".{path.name}.partial")
    target = str(partial).replace("'", "''")
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        if path.suffix == ".parquet":
            con.execute(f"COPY ({query}) TO '{target}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 1000000)")
        else:
            con.execute(
                f"COPY (SELECT strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS ts, * EXCLUDE (ts) FROM ({query})) "
                f"TO '{target}' (FORMAT json)"
            )
    finally:
        con.close()
    os.replace(partial, path)


def site_profiles(site: SiteRepo) -> dict[str, tuple[int, int]]:
    """Each deployment's declared context profile (p50, p95): the lengths its sample records follow."""
    return {n: (d.context.p50, d.context.p95) for n, d in site.deployments.items() if d.context}


def sample_month(path: Path, site: SiteRepo, month: Month, count: int, *, seed: int = 0) -> None:
    """A month of `count` request records for the site's deployments and tenants, ids unique per month and seed."""
    profiles = site_profiles(site)
    if not profiles:
        raise UsageError(
            "no deployment of the site declares a context profile to sample from",
            hint="add `context: {p50: ..., p95: ...}` to a deployment in deployments/",
        )
    if not site.tenants:
        raise UsageError(
            "the site has no tenants to book the sample records to", hint="add one with `fabric tenants add`"
        )
    if path.suffix not in (".jsonl", ".parquet"):
        raise UsageError(f"{path}: the records file must end in .jsonl or .parquet")
    generate_records(
        path,
        month,
        count,
        profiles,
        sorted(site.tenants),
        request_ids=True,
        id_prefix=f"sample-{month}-{seed}-",
        seed=seed,
    )
