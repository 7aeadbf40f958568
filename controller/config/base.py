"""The base of every config model: unknown keys are errors, and a loaded config is frozen.

`extra="forbid"` turns a misspelt key into an error that names it (instead of a default
silently used); `frozen=True` because a config is read once and shared by every machine
built from it, so nobody may change it under the others.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
