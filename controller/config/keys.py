"""The key file: which keys may sign and verify GOOSE, each with its algorithm and window.

A YAML (or TOML/JSON) file per controller, named by `goose.keys` or `--keys`::

    grace_s: 60                 # a key is accepted this long before and after its window
    keys:
      - key_id: 7
        algorithm: hmac-sha256-128
        secret: /etc/goosectl/keys/k7.hex      # hex digits, file mode 0600
        not_before: 2026-01-01T00:00:00Z
        not_after: 2026-02-01T00:00:00Z
        chain: bay1          # optional: keys of one chain succeed one another

The secret is never in the key file itself, so the key file may be read by operators and
versioned; each secret file must be readable by its owner only (0600 or stricter), and is
refused otherwise, naming the file. GDOI (IEC 62351-9, RFC 8052) would fill exactly this:
key id, algorithm, material, validity. The algorithm lives here and only here: a frame
names a key id, never how to check it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, Field, model_validator

from goosectl.controller.config.base import Cfg
from goosectl.controller.config.validate import ConfigError, validate_data
from goosectl.controller.engine.findings import TableError
from goosectl.controller.engine.loader import read_document
from goosectl.protocols.goose.security import ALGORITHMS, CIPHERS, MacKey

AlgorithmName = Literal[
    "hmac-sha256-80", "hmac-sha256-128", "hmac-sha256-256", "aes-gmac-128", "aes-128-gcm"
]
#: a secret file is not read past this (a key is tens of octets; a FIFO must not hang us)
MAX_SECRET_BYTES = 4096


class KeyEntryCfg(Cfg):
    key_id: int = Field(ge=1, le=0xFFFFFFFF)
    algorithm: AlgorithmName
    secret: Path = Field(description="a file of mode 0600 holding the secret as hex digits")
    not_before: AwareDatetime
    not_after: AwareDatetime
    # a publisher configured with one key of a chain signs with the chain's key in force,
    # so it switches key ids at the next key's not_before (a rollover without a restart)
    chain: str | None = None

    @model_validator(mode="after")
    def _window(self) -> KeyEntryCfg:
        if self.not_after <= self.not_before:
            raise ValueError("not_after must be later than not_before")
        return self


class KeyFileCfg(Cfg):
    grace_s: float = Field(default=60.0, ge=0, le=86_400)
    keys: list[KeyEntryCfg] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> KeyFileCfg:
        seen: set[int] = set()
        for i, k in enumerate(self.keys):
            if k.key_id in seen:
                raise ValueError(f"keys[{i}]: key_id {k.key_id} is listed twice")
            seen.add(k.key_id)
        return self


@dataclass(frozen=True, slots=True)
class Key:
    """One key in force: the prepared MAC key and its window in UTC nanoseconds."""

    key: MacKey
    not_before_ns: int
    not_after_ns: int
    chain: str | None = None

    @property
    def key_id(self) -> int:
        return self.key.key_id

    @property
    def algorithm(self) -> str:
        return self.key.algorithm.name


@dataclass(frozen=True, slots=True)
class KeyFile:
    """A loaded key file: what `controller/goose/auth.py` decides with."""

    source: str
    keys: dict[int, Key]
    grace_ns: int

    def successors(self, key_id: int) -> list[Key]:
        """The key `key_id` and the keys of its chain, by not_before (oldest first)."""
        first = self.keys.get(key_id)
        if first is None:
            return []
        if first.chain is None:
            return [first]
        chain = [k for k in self.keys.values() if k.chain == first.chain]
        return sorted(chain, key=lambda k: (k.not_before_ns, k.key_id))


def _ns(t: datetime) -> int:
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000


def read_secret(path: Path, where: str) -> bytes:
    """The secret octets of a key entry; a ConfigError naming the file, field and reason."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"{where}: {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{where}: {path}: not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise ConfigError(
                f"{where}: {path}: mode {mode:04o} lets others read the secret "
                "(chmod 0600: owner only)"
            )
        raw = os.read(fd, MAX_SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(raw) > MAX_SECRET_BYTES:
        raise ConfigError(f"{where}: {path}: more than {MAX_SECRET_BYTES} octets")
    try:
        return bytes.fromhex(raw.decode("ascii").replace("\n", " "))
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(f"{where}: {path}: the secret is not hex digits") from None


def load_keys(path: str | Path) -> KeyFile:
    """Read and check a key file and every secret it names; any defect is a ConfigError
    that names the file, the field and the reason (and nothing is half loaded)."""
    p = Path(path)
    try:
        data, line_of = read_document(p)
    except TableError as exc:
        raise ConfigError("\n".join(str(f) for f in exc.findings)) from exc
    cfg = validate_data(KeyFileCfg, data, str(p), line_of)
    keys: dict[int, Key] = {}
    for i, entry in enumerate(cfg.keys):
        line = line_of(("keys", i, "secret"))
        where = f"{p}:{line}: keys.{i}.secret" if line else f"{p}: keys.{i}.secret"
        secret_path = entry.secret if entry.secret.is_absolute() else p.parent / entry.secret
        secret = read_secret(secret_path, where)
        try:
            mac_key = MacKey(entry.key_id, (ALGORITHMS | CIPHERS)[entry.algorithm], secret)
        except ValueError as exc:
            raise ConfigError(f"{where}: {secret_path}: {exc}") from None
        keys[entry.key_id] = Key(mac_key, _ns(entry.not_before), _ns(entry.not_after), entry.chain)
    return KeyFile(str(p), keys, int(cfg.grace_s * 1e9))
