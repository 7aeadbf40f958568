"""Parsed config data -> a model, or every problem at once in the one error format.

`file:line: key.path: reason` per problem, so a user fixes a config in one pass. Every
loader (`load.py` for YAML/TOML/JSON, `scl/` for SCL) ends here.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from goosectl.controller.engine.loader import LineOf, validation_findings

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """A config file could not be used; the message lists every problem."""


def validate_data(model: type[M], data: dict, source: str, line_of: LineOf, strip: str = "") -> M:
    """Validate parsed config data; errors name the source, line, key path and reason.
    `strip`: a key prefix the file did not write (a GOOSE-only file's implied `goose.`)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for f in validation_findings(exc, source, line_of):
            item = f.item[len(strip) :] if strip and f.item.startswith(strip) else f.item
            where = f"{f.source}:{f.line}" if f.line else f.source
            lines.append(f"{where}: {item}: {f.reason}")
        raise ConfigError("\n".join(lines)) from exc
