"""The request record: one served (or refused) request, the one schema every writer of records uses.

The tenant gateway's meter (inside LiteLLM's process), `fabric engine burst` and its agentic sessions
write one JSON object per line (`RequestRecord.json_line`); an exporter may write Parquet with these
column names. `fabric ledger ingest` and `fabric report --requests` read them (llm_fabric.ledger.store),
LiteLLM spend-log exports through an adapter. Pydantic and the foundation only, so the gateway's
runtime can import it.

| column | type | required | meaning |
|---|---|---|---|
| ts | RFC 3339 string (Parquet: timestamp) | yes | when the request arrived; naive times are UTC |
| model | string | yes | the deployment that served it (the served model name) |
| tenant | string | yes | the tenant (tenants/NAME.yaml) that sent it |
| site | string | no | the site (or external provider) whose replica served it |
| prompt_tokens | integer | yes (may be null) | input tokens, cached ones included; null: 0, and no prompt length |
| completion_tokens | integer | yes (may be null) | output tokens; null: 0 |
| cached_prompt_tokens | integer | no | input tokens served from the prefix cache |
| ttft_ms | number | no | time to first token in milliseconds |
| status | string | yes | the HTTP status the client got, 3 digits (`200` a success, `429` a refusal), or `cut` |
| request_id | string | no | the natural key (below) |
| data_class, prompt | string | no | the meter's: data class, prompt where logging is allowed; not read |
| relay_from | string | no | the meter's: the entry site of a request another site's gateway relayed; not read |

`cut`: a streamed answer began (200) and broke off before its end (the engine's stream ended
unfinished); the client got an error event, not [DONE]; the ledger counts it as a failure, with the
output tokens it delivered.

A refused request has no prompt length: its `prompt_tokens` is null (the month's prompt percentiles
do not count it as a length-0 prompt) and its `completion_tokens` 0. The ledger also reads the status
spellings of older files and other exporters (`ok`, `success`, `succeeded`, any `2xx`: a success).

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
from typing import Annotated

from pydantic import Field

from llm_fabric.basemodel import FabricModel

# the columns the ledger reads and stores
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
OK = "200"
CUT = "cut"  # a streamed answer that began and broke off: the client got an error event, not [DONE]

TokenCount = Annotated[int, Field(ge=0, lt=MAX_TOKENS)]
HttpStatus = Annotated[str, Field(pattern=r"^([1-5][0-9][0-9]|cut)$")]


class RequestRecord(FabricModel):
    """One request as a writer logs it; `json_line()` is its line in a JSON Lines file."""

    ts: datetime = Field(description="when the request arrived; naive: UTC")
    model: Annotated[str, Field(min_length=1)] = Field(description="the deployment name")
    tenant: Annotated[str, Field(min_length=1)]
    site: str | None = None
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = 0
    cached_prompt_tokens: TokenCount | None = None
    ttft_ms: Annotated[float, Field(ge=0, lt=MAX_TTFT_MS)] | None = None
    status: HttpStatus = Field(description="the HTTP status the client got (200 is a success), or `cut`")
    request_id: str | None = None
    relay_from: str | None = Field(
        None,
        description="the entry site, when another site's gateway relayed the request here: its record and "
        "the entry's share the request id, and the ledger keeps one of them",
    )
    data_class: str | None = None
    prompt: str | None = None

    @property
    def answered(self) -> bool:
        return self.status == OK

    def json_line(self) -> str:
        """The record as one JSON Lines line (ts in UTC, `Z`; absent optional columns left out)."""
        ts = self.ts if self.ts.tzinfo is None else self.ts.astimezone(UTC).replace(tzinfo=None)
        body = self.model_dump(exclude_none=True)
        body["ts"] = ts.isoformat(timespec="microseconds") + "Z"
        # the ledger requires both token columns; a null prompt_tokens says "no prompt length"
        body.setdefault("prompt_tokens", None)
        body.setdefault("completion_tokens", None)
        return json.dumps(body, sort_keys=True) + "\n"
