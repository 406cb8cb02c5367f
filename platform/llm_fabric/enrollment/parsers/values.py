"""Cell values as the tools print them: `[N/A]`, `[Not Supported]`, units, bracketed remarks."""

from __future__ import annotations

import re

_MISSING = {
    "",
    "n/a",
    "[n/a]",
    "na",
    "none",
    "not supported",
    "[not supported]",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
    "[requested functionality has been deprecated]",
    "insufficient permissions",
    "[insufficient permissions]",
}
_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(mib|mb|gib|gb|b)?\s*$", re.IGNORECASE)
_VERSION = re.compile(r"[0-9]+(?:\.[0-9A-Za-z]+)*")


def present(value: str | None) -> str | None:
    """The value, stripped, or None when the tool said it has none."""
    if value is None:
        return None
    text = value.strip()
    return None if text.lower() in _MISSING else text


def mib(value: str | None) -> int | None:
    """`81559 MiB` -> 81559; `[N/A]` -> None. Bytes and GiB are converted."""
    text = present(value)
    if text is None:
        return None
    match = _NUMBER.match(text)
    if match is None:
        return None
    number, unit = float(match.group(1)), (match.group(2) or "mib").lower()
    factor = {"mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0, "b": 1.0 / (1024 * 1024)}[unit]
    return round(number * factor)


def version(value: str | None) -> str | None:
    """`610.57.04 [Deprecated; ...]` -> `610.57.04`: the first version-looking token."""
    text = present(value)
    if text is None:
        return None
    match = _VERSION.search(text)
    return match.group(0) if match else None


def enabled(value: str | None) -> bool | None:
    """`Enabled`/`On`/`Yes` -> True, `Disabled`/`Off`/`No` -> False, anything else -> None."""
    text = (present(value) or "").lower()
    if text in ("enabled", "on", "yes", "true"):
        return True
    if text in ("disabled", "off", "no", "false"):
        return False
    return None


def pci_device_id(value: str | None) -> str | None:
    """`0x233010DE` (device+vendor) or `0x2330` or `2330` -> `0x2330`."""
    text = (present(value) or "").lower().removeprefix("0x")
    if not text or any(c not in "0123456789abcdef" for c in text):
        return None
    if len(text) == 8:
        text = text[:4]
    return "0x" + text[-4:].rjust(4, "0")
