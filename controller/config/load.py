"""Load a config file into the models, or say exactly what is wrong: the entry every
command uses.

Every error names the file, the line (YAML), the key path and the reason, all of them at
once (`validate.py`). A YAML/TOML/JSON file is read here; an SCL file (with the IED to
configure) or a config with an `scl:` overlay key goes through `scl/loader.py` and comes
out as the same models.

One format for every command: the controller config (`ControllerConfig`). A GOOSE-only
file is that schema with the bay parts absent: its `goose:` section alone, or the goose
section's keys at the top level (`subscriptions:`, `publishers:` ... as in
examples/goose/subscriptions.yaml), which is read as `goose:`. Commands that need only
GOOSE (`replay`, `listen`, `publish`) take the `goose` part of any controller config, so
the same file works with and without `--device sim`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.scl.loader import SclConfigError, load_overlay, load_scl_config
from goosectl.controller.config.validate import ConfigError, validate_data
from goosectl.controller.engine.findings import TableError
from goosectl.controller.engine.loader import LineOf, read_document
from goosectl.protocols.scl import SCL_SUFFIXES

M = TypeVar("M", bound=BaseModel)


def load_config(path: str | Path, model: type[M], ied: str | None = None) -> M:
    """`ied`: the IED to configure when the file is SCL (an SCD, CID ...; see
    `scl/loader.py`) or a config with an `scl:` overlay key."""
    if model is GooseConfig:  # one format: the goose part of the controller config
        return load_config(path, ControllerConfig, ied).goose  # type: ignore[return-value]
    p = Path(path)
    if p.suffix.lower() in SCL_SUFFIXES or ied is not None:
        return _scl(p, model, ied, None, None)
    try:
        data, line_of = read_document(p)
    except TableError as exc:
        raise ConfigError("\n".join(str(f) for f in exc.findings)) from exc
    flat = False
    if model is ControllerConfig:
        flat = "goose" not in data
        data, line_of = goose_only_as_controller(data, str(p), line_of)
        flat = flat and "goose" in data  # keys as written: `subscriptions.0`, not `goose.`
    if "scl" in data:
        return _scl(p, model, ied, data, line_of)
    return validate_data(model, data, str(p), line_of, "goose." if flat else "")


def goose_only_as_controller(data: dict, source: str, line_of: LineOf) -> tuple[dict, LineOf]:
    """A file with the goose section's keys at the top level is that section (`goose:`);
    goose keys beside controller keys are an error that says where they belong."""
    if not isinstance(data, dict):
        return data, line_of
    goose_keys = [k for k in data if k in GooseConfig.model_fields]
    if not goose_keys:
        return data, line_of
    others = [k for k in data if k != "scl" and k not in GooseConfig.model_fields]
    if any(k in ControllerConfig.model_fields for k in others):
        raise ConfigError(
            "\n".join(
                f"{source}:{line_of((k,)) or '?'}: {k}: a key of the goose section: "
                f"move it under `goose:` (one config format; README: Configuration)"
                for k in goose_keys
            )
        )
    wrapped = {"goose": {k: v for k, v in data.items() if k != "scl"}}
    if "scl" in data:
        wrapped["scl"] = data["scl"]

    def shifted(path):
        return line_of(path[1:] if path and path[0] == "goose" else path)

    return wrapped, shifted


def _scl(p: Path, model: type[M], ied: str | None, data: dict | None, line_of) -> M:
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
