"""Key files for the IEC 62351-6 tests: real files with 0600 secrets, loaded by the loader."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from goosectl.controller.config.keys import KeyFile, load_keys

S = 1_000_000_000


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / S, UTC).isoformat().replace("+00:00", "Z")


def write_keys(
    tmp: Path, entries: list[dict[str, Any]], grace_s: float = 1.0, name: str = "keys.yaml"
) -> Path:
    """Each entry: key_id, algorithm, secret (bytes), not_before/not_after (UTC ns), chain."""
    keys = []
    for e in entries:
        secret = tmp / f"k{e['key_id']}.hex"
        secret.write_text(e["secret"].hex() + "\n")
        os.chmod(secret, e.get("mode", 0o600))
        keys.append(
            {
                "key_id": e["key_id"],
                "algorithm": e["algorithm"],
                "secret": str(secret),
                "not_before": iso(e["not_before"]),
                "not_after": iso(e["not_after"]),
            }
            | ({"chain": e["chain"]} if "chain" in e else {})
        )
    path = tmp / name
    path.write_text(yaml.safe_dump({"grace_s": grace_s, "keys": keys}))
    return path


def keyfile(tmp: Path, entries: list[dict[str, Any]], grace_s: float = 1.0) -> KeyFile:
    return load_keys(write_keys(tmp, entries, grace_s))
