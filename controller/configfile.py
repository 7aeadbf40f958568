"""Load a YAML/TOML/JSON config file into a pydantic model, or say exactly what is wrong.

Every error names the file, the line (YAML), the key path and the reason, all of them at
once, so a user fixes a config in one pass. Shared by every config goosectl reads. An SCL
file (with the IED to configure) or a config with an `scl:` overlay key goes through
controller/scl/config.py and comes out as the same models.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from controller.engine.findings import TableError
from controller.engine.loader import LineOf, read_document, validation_findings
from protocols.scl import SCL_SUFFIXES

M = TypeVar("M", bound=BaseModel)


class ConfigError(Exception):
    """A config file could not be used; the message lists every problem."""


def load_config(path: str | Path, model: type[M], ied: str | None = None) -> M:
    """`ied`: the IED to configure when the file is SCL (an SCD, CID ...; see
    controller/scl/config.py) or a config with an `scl:` overlay key."""
    p = Path(path)
    if p.suffix.lower() in SCL_SUFFIXES or ied is not None:
        return _scl(p, model, ied, None, None)
    try:
        data, line_of = read_document(p)
    except TableError as exc:
        raise ConfigError("\n".join(str(f) for f in exc.findings)) from exc
    if "scl" in data:
        return _scl(p, model, ied, data, line_of)
    return validate_data(model, data, str(p), line_of)


def validate_data(model: type[M], data: dict, source: str, line_of: LineOf) -> M:
    """Validate parsed config data; errors name the source, line, key path and reason."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{f.source}:{f.line}: {f.item}: {f.reason}"
            if f.line
            else f"{f.source}: {f.item}: {f.reason}"
            for f in validation_findings(exc, source, line_of)
        ]
        raise ConfigError("\n".join(lines)) from exc


def _scl(p: Path, model: type[M], ied: str | None, data: dict | None, line_of) -> M:
    from controller.scl.config import SclConfigError, load_overlay, load_scl_config

    try:
        if data is not None:
            return load_overlay(p, data, line_of, model, ied)
        if p.suffix.lower() not in SCL_SUFFIXES:
            raise SclConfigError(
                f"{p}: --ied is for SCL files ({', '.join(sorted(SCL_SUFFIXES))}) "
                "or a config with an `scl:` key"
            )
        return load_scl_config(p, model, ied)
    except SclConfigError as exc:
        raise ConfigError(str(exc)) from exc
