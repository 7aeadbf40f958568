"""Load a YAML/TOML/JSON config file into a pydantic model, or say exactly what is wrong.

Every error names the file, the line (YAML), the key path and the reason, all of them at
once, so a user fixes a config in one pass. Shared by every config goosectl reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from controller.engine.findings import TableError
from controller.engine.loader import read_document, validation_findings

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """A config file could not be used; the message lists every problem."""


def load_config(path: str | Path, model: type[M]) -> M:
    p = Path(path)
    try:
        data, line_of = read_document(p)
    except TableError as exc:
        raise ConfigError("\n".join(str(f) for f in exc.findings)) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{f.source}:{f.line}: {f.item}: {f.reason}"
            if f.line
            else f"{f.source}: {f.item}: {f.reason}"
            for f in validation_findings(exc, str(p), line_of)
        ]
        raise ConfigError("\n".join(lines)) from exc
