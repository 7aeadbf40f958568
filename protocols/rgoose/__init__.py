"""R-GOOSE: GOOSE over UDP in the IEC 61850-90-5 session protocol (8-1 Ed2.1 Amd1).

Bytes only, like `protocols.goose`: `spdu` encodes and strictly decodes the SPDU, and
verifies or decrypts it with a key the caller chose (`controller/goose/auth.py` decides
which keys, and whether an unsecured SPDU may pass).
"""

from goosectl.protocols.rgoose.spdu import (
    PORT,
    SI_GOOSE,
    Apdu,
    BadSpdu,
    Spdu,
    SpduRefused,
    apdu_of_frame,
    decode,
    encode,
    frame_of_apdu,
    open_spdu,
)

__all__ = [
    "PORT",
    "SI_GOOSE",
    "Apdu",
    "BadSpdu",
    "Spdu",
    "SpduRefused",
    "apdu_of_frame",
    "decode",
    "encode",
    "frame_of_apdu",
    "open_spdu",
]
