"""The base of every model the fabric reads from a file: unknown keys are errors, never ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FabricModel(BaseModel):
    """Strict model: a typo in a YAML key fails loudly (with a "did you mean" from the loader)."""

    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=False)
