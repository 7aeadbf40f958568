"""Load a YAML/TOML/JSON config file into a pydantic model, or say exactly what is wrong.

Every error names the file, the line (YAML), the key path and the reason, all of them at
once, so a user fixes a config in one pass. Shared by every config goosectl reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from controller.engine.findings import TableError
from controller.engine.loader import read_document

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
        lines = []
        for err in exc.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and "[" in x))
            key = ".".join(str(x) for x in loc) or "(top level)"
            line = line_of(loc)
            where = f"{p}:{line}" if line else str(p)
            lines.append(f"{where}: {key}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from exc
