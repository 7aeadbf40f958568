"""The libiec61850 R-GOOSE SPDUs of tests/data/rgoose and their key."""

from __future__ import annotations

from pathlib import Path

from goosectl.protocols.goose.security import ALGORITHMS, CIPHERS, MacKey

DATA = Path(__file__).resolve().parents[1] / "data" / "rgoose"
#: the key both secured vectors are made with (key id 1), as their source states it
MATERIAL = bytes(range(16))


def vector(name: str) -> bytes:
    return bytes.fromhex((DATA / f"libiec_{name}.hex").read_text())


UNSECURED = vector("unsecured")
HMAC128 = vector("hmac_sha256_128")
GCM128 = vector("aes_128_gcm")


def key(algorithm: str, key_id: int = 1, material: bytes = MATERIAL) -> MacKey:
    return MacKey(key_id, (ALGORITHMS | CIPHERS)[algorithm], material)
