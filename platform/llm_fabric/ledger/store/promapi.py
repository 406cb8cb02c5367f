"""A small client for the Prometheus HTTP API (instant queries), with a bounded retry."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

from llm_fabric.errors import UsageError


class PrometheusClient:
    def __init__(self, url: str, *, timeout: float = 30.0, attempts: int = 3, backoff_s: float = 1.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.attempts = attempts
        self.backoff_s = backoff_s

    def query(self, expr: str, at: datetime) -> list[dict[str, Any]]:
        """Result of an instant query at `at` (vector or matrix), as Prometheus returns it."""
        data = self._get("query", {"query": expr, "time": f"{at.timestamp():.3f}"})
        return list(data.get("result", []))

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        last = ""
        for attempt in range(1, self.attempts + 1):
            try:
                with urllib.request.urlopen(url, timeout=self.timeout) as resp:
                    body = json.load(resp)
                break
            except urllib.error.HTTPError as exc:
                # 4xx is a bad query: retrying cannot help
                detail = exc.read().decode("utf-8", "replace")[:300]
                if 400 <= exc.code < 500:
                    query = params.get("query")
                    raise UsageError(f"Prometheus at {self.url} refused the query `{query}`: {detail}") from exc
                last = f"HTTP {exc.code}: {detail}"
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError) as exc:
                last = str(getattr(exc, "reason", exc))
            if attempt < self.attempts:
                time.sleep(self.backoff_s * attempt)
        else:
            raise UsageError(
                f"Prometheus at {self.url} is unreachable after {self.attempts} attempts: {last}",
                hint="check --prometheus (e.g. http://127.0.0.1:9090) and that the server is up",
            )
        if body.get("status") != "success":
            raise UsageError(f"Prometheus at {self.url} answered an error: {body.get('error', body)}")
        return dict(body["data"])
