"""The base of every model the fabric reads from a file: unknown keys are errors, never ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FabricModel(BaseModel):
    """Strict model: a typo in a YAML key fails loudly (with a "did you mean" from the loader).

    `.inf` and `.nan` are refused in every float: no figure of the fabric is infinite, and NaN passes
    every bound check.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True, populate_by_name=False, allow_inf_nan=False)
