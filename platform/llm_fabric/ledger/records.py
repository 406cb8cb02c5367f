"""Request records: the ledger's one record schema, for whoever writes records and for the readers.

The tenant gateway's meter, `fabric engine burst` and any exporter write one JSON object per line
(or Parquet with these column names) in this schema; `fabric ledger ingest` reads them
(llm_fabric.ledger.sources), and LiteLLM spend-log exports through an adapter. Kept free of DuckDB
and of the rest of the ledger so a writer can import it cheaply.

| column | type | required | meaning |
|---|---|---|---|
| ts | RFC 3339 string (Parquet: timestamp) | yes | when the request arrived; naive times are UTC |
| model | string | yes | the deployment that served it (the served model name) |
| tenant | string | yes | the tenant (tenants/NAME.yaml) that sent it |
| site | string | no | the site whose replica served it |
| prompt_tokens | integer | yes (may be null) | input tokens, cached ones included; null: 0, and no prompt length |
| completion_tokens | integer | yes (may be null) | output tokens; null: 0 |
| cached_prompt_tokens | integer | no | input tokens served from the prefix cache |
| ttft_ms | number | no | time to first token in milliseconds |
| status | string | yes | `ok`/`success`/`succeeded`/`2xx` is a success; anything else (`429`, `error`) a failure |
| request_id | string | no | the natural key (below) |

Natural key: a record with a `request_id` is that request; the same id ingested again, from the same
file or another, is the same request and is not added twice. A record without one is keyed by its
whole content (`CONTENT_KEY`: every column above but `request_id`, with `ts` to the microsecond) and
its occurrence number among the identical records of its file: re-ingesting the file (or an
overlapping export with the same multiplicity) changes nothing, and two identical lines in one file
are two requests (docs/ledger.md says why this rule).

Invariants of a valid record (anything else is a bad record, reported by file and line):
token counts are whole numbers from 0 to `MAX_TOKENS - 1`; TTFT is from 0 to `MAX_TTFT_MS`
milliseconds (beyond it a clock is wrong); ts, model and tenant are present.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import Field

from llm_fabric.basemodel import FabricModel

RecordFormat = Literal["auto", "fabric", "litellm"]

COLUMNS = (
    "ts",
    "model",
    "tenant",
    "site",
    "prompt_tokens",
    "completion_tokens",
    "cached_prompt_tokens",
    "ttft_ms",
    "status",
    "request_id",
)
# columns a file must have (a record may still hold null in the token columns, see above)
REQUIRED = ("ts", "model", "tenant", "prompt_tokens", "completion_tokens", "status")
OPTIONAL = tuple(c for c in COLUMNS if c not in REQUIRED)
CONTENT_KEY = tuple(c for c in COLUMNS if c != "request_id")
MAX_TOKENS = 1 << 31
MAX_TTFT_MS = 4_000_000
SUCCESS_STATUSES = ("ok", "success", "succeeded")
# the same rule as `is_success`, for DuckDB
SUCCESS_SQL = "(lower(status) IN ('ok', 'success', 'succeeded') OR status LIKE '2__')"

TokenCount = Annotated[int, Field(ge=0, lt=MAX_TOKENS)]


def is_success(status: str | None) -> bool:
    """`ok`/`success`/`succeeded` (any case) or a three-character status starting with 2 (`200`, `2xx`)."""
    return status is not None and (status.lower() in SUCCESS_STATUSES or (len(status) == 3 and status[0] == "2"))


class RequestRecord(FabricModel):
    """One request as a writer logs it; `json_line()` is its line in a JSON Lines file."""

    ts: datetime
    model: Annotated[str, Field(min_length=1)]
    tenant: Annotated[str, Field(min_length=1)]
    site: str | None = None
    prompt_tokens: TokenCount | None
    completion_tokens: TokenCount | None
    cached_prompt_tokens: TokenCount | None = None
    ttft_ms: Annotated[float, Field(ge=0, lt=MAX_TTFT_MS)] | None = None
    status: str
    request_id: str | None = None

    def json_line(self) -> str:
        """The record as one JSON Lines line (ts in UTC, `Z`; absent optional columns left out)."""
        ts = self.ts if self.ts.tzinfo is None else self.ts.astimezone(UTC).replace(tzinfo=None)
        body = self.model_dump(exclude_none=True)
        body["ts"] = ts.isoformat(timespec="microseconds") + "Z"
        body.setdefault("prompt_tokens", None)
        body.setdefault("completion_tokens", None)
        return json.dumps(body, sort_keys=True) + "\n"
