"""The device link's bytes: COBS + CRC-16 framing and the message schema (see SPEC.md).

Nothing here keeps link state or reads a clock; the controller's serial driver and the
device simulator build their machines on these functions. Only `port` touches I/O.
"""

from goosectl.protocols.serial.errors import ErrorKind, LinkProtocolError
from goosectl.protocols.serial.messages import (
    SENT_BY_CONTROLLER,
    SENT_BY_DEVICE,
    VERSION,
    Kind,
    Message,
    MsgType,
    decode_payload,
    encode_payload,
    nack_for,
)
from goosectl.protocols.serial.stream import StreamDecoder, decode_frame, frame

__all__ = [
    "SENT_BY_CONTROLLER",
    "SENT_BY_DEVICE",
    "VERSION",
    "ErrorKind",
    "Kind",
    "LinkProtocolError",
    "Message",
    "MsgType",
    "StreamDecoder",
    "decode_frame",
    "decode_payload",
    "encode_payload",
    "frame",
    "nack_for",
]
