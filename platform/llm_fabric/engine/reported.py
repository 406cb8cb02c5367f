"""What a running engine reports about its configuration, and the HTTP that asks it.

Each backend says which of a replica's fingerprint fields (`engine.fingerprint`) its engine reports
and how (`reported_config`), and what the plan's own engine arguments say for the same fields
(`planned_config`), in the engine's vocabulary: SGLang's KV-cache dtype names, for one, are not the
fabric's. `fabric check live` (`llm_fabric.live.drift`) compares the two field by field.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from llm_fabric.errors import UsageError

# a field's value as an engine reports it (JSON scalars)
Reported = dict[str, str | int | float | bool | None]


class EngineUnreachable(UsageError):
    """An engine did not answer a configuration question (connection refused, timeout, not JSON, error status)."""


def flag(args: list[str], name: str) -> str | None:
    """The value of `name` in an argument list (`--name VALUE` or `--name=VALUE`); None when absent."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def get_text(base_url: str, path: str, timeout: float) -> str:
    url = base_url.rstrip("/") + path
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return str(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise EngineUnreachable(f"GET {url} answered {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise EngineUnreachable(f"GET {url} failed: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise EngineUnreachable(f"GET {url} answered something that is not UTF-8 text") from exc


def get_json(base_url: str, path: str, timeout: float) -> Any:
    text = get_text(base_url, path, timeout)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise EngineUnreachable(f"GET {base_url.rstrip('/')}{path} answered something that is not JSON") from exc
