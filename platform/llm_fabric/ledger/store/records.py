"""How the ledger reads request records: the file formats it knows and which statuses are a success.

The schema itself is the foundation's (llm_fabric.request_record): writers import that, not the
ledger. Reading is more lenient than writing: besides the HTTP status the writers use (`200`), the
ledger counts the spellings of older files and of LiteLLM exports (`ok`, `success`, `succeeded`, any
`2xx`) as a success, and anything else (`429`, `error`, `failure`) as a failure.
"""

from __future__ import annotations

from typing import Literal, cast, get_args

from llm_fabric.errors import UsageError

RecordFormat = Literal["auto", "fabric", "litellm"]

SUCCESS_STATUSES = ("ok", "success", "succeeded")
# a success as DuckDB sees it: one of SUCCESS_STATUSES (any case) or a three-character status starting with 2
SUCCESS_SQL = f"(lower(status) IN ({', '.join(repr(s) for s in SUCCESS_STATUSES)}) OR status LIKE '2__')"


def record_format(name: str) -> RecordFormat:
    """`name` as a RecordFormat, or a UsageError naming the ones there are."""
    if name not in get_args(RecordFormat):
        raise UsageError(f"unknown record format {name!r}", hint=f"use one of {', '.join(get_args(RecordFormat))}")
    return cast(RecordFormat, name)
