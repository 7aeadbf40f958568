"""The device-link message set as one table of data, and the two small functions applying it.

Every message type is a row: code, class, kind (who sends it and what answers it), whether
a device must be synchronised to execute it, and its body layout as (field, struct
format, allowed codes). `encode_payload` and `decode_payload` read the row; adding a
message is adding a row and a dataclass, and SPEC.md documents the same table for firmware.

Payload layout (before COBS; all multi-byte integers big-endian):

    offset 0  u8   version (VERSION)
    offset 1  u8   type code
    offset 2  u16  seq
    offset 4  ...  body (fixed length per type)
    offset n-2 u16 CRC-16/IBM-3740 over bytes 0..n-3
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum, IntEnum, IntFlag
from operator import attrgetter
from typing import Any

from goosectl.protocols.serial import crc as _crc
from goosectl.protocols.serial.errors import (
    BadBodyLength,
    BadCrc,
    BadFieldValue,
    EncodeError,
    ErrorKind,
    FrameTooShort,
    LinkProtocolError,
    UnknownType,
    UnknownVersion,
    WrongDirection,
)
from goosectl.protocols.serial.framing import MAX_PAYLOAD

VERSION = 1
HEADER = struct.Struct(">BBH")  # version, type, seq: frozen for every future version
HEADER_SIZE = HEADER.size
CRC_SIZE = _crc.SIZE
MIN_PAYLOAD = HEADER_SIZE + CRC_SIZE
SEQ_MODULO = 1 << 16


# ---------------------------------------------------------------- codes carried in bodies


class Kind(Enum):
    """What a message is for; decides who sends it and what answers it."""

    COMMAND = "command"  # controller -> device, answered by ACK or NACK with the same seq
    EVENT_ACK = "event_ack"  # controller -> device, confirms the event whose seq it carries
    RESPONSE = "response"  # device -> controller, seq = the command's seq
    EVENT = "event"  # device -> controller, seq = device's event counter, needs EVENT_ACK


SENT_BY_CONTROLLER: frozenset[Kind] = frozenset({Kind.COMMAND, Kind.EVENT_ACK})
SENT_BY_DEVICE: frozenset[Kind] = frozenset({Kind.RESPONSE, Kind.EVENT})


class MsgType(IntEnum):
    """Type codes. 0x01-0x3F controller->device, 0x40-0x7F events, 0x80-0xBF responses."""

    PING = 0x01
    READ_STATUS = 0x02
    TRIP = 0x03
    CLOSE = 0x04
    SET_OUTPUT = 0x05
    RESET = 0x06
    CONFIGURE = 0x07
    EVENT_ACK = 0x20
    POWER_UP = 0x40
    POSITION_CHANGE = 0x41
    ALARM = 0x42
    SPRING_CHARGED = 0x43
    INPUT_CHANGE = 0x44
    ACK = 0x80
    NACK = 0x81


class Dbpos(IntEnum):
    """IEC 61850 double-point position, from auxiliary contacts: (52a << 1) | 52b."""

    INTERMEDIATE = 0  # both contacts open: travelling (or a broken wire)
    OFF = 1  # 52a open, 52b closed
    ON = 2  # 52a closed, 52b open
    BAD = 3  # both closed: contact discrepancy


class AckResult(IntEnum):
    DONE = 0  # executed and complete
    NO_CHANGE = 1  # already in the requested state; nothing was actuated
    STARTED = 2  # coil energised; completion is reported by a POSITION_CHANGE event


class NackReason(IntEnum):
    """Why a command was not executed. A NACK always means: nothing was actuated."""

    UNKNOWN_VERSION = 0x01
    UNKNOWN_TYPE = 0x02
    BAD_LENGTH = 0x03
    BAD_VALUE = 0x04
    UNEXPECTED_TYPE = 0x05  # a valid type that only the device sends
    NOT_SYNCED = 0x06  # POWER_UP not yet acknowledged; see SPEC "Boot and resync"
    STALE_SEQUENCE = 0x07  # seq older than the last executed one and no longer cached
    BUSY = 0x08  # an operation is in progress
    SPRING_DISCHARGED = 0x20
    CLOSE_BLOCKED_ALARM = 0x21  # e.g. gas pressure low
    ANTI_PUMP = 0x22
    TRIP_CIRCUIT_FAULT = 0x23
    POSITION_BAD = 0x24  # Dbpos intermediate or bad: refuse to guess
    UNKNOWN_PARAMETER = 0x25
    OUT_OF_RANGE = 0x26


class AlarmId(IntEnum):
    GAS_PRESSURE_LOW = 1
    TRIP_CIRCUIT_FAULT = 2
    MECHANISM_TIMEOUT = 3  # no end position within the operating time + margin
    ANTI_PUMP_LOCKOUT = 4
    POSITION_BAD = 5
    SPRING_CHARGE_TIMEOUT = 6
    EVENT_OVERFLOW = 7  # the device dropped events: the controller must resync


class PositionCause(IntEnum):
    TRIP_COMMAND = 0
    CLOSE_COMMAND = 1
    EXTERNAL = 2  # manual operation or protection outside this link
    DISCREPANCY = 3  # contacts moved without a cause the device knows


class ResetMode(IntEnum):
    CLEAR_LATCHED = 0  # clear anti-pump lockout and latched alarms, keep running
    REBOOT = 1  # acknowledge, then restart (boot counter + 1, POWER_UP follows)


class ResetCause(IntEnum):
    POWER_ON = 0
    WATCHDOG = 1
    COMMANDED = 2
    BROWN_OUT = 3


class ConfigParam(IntEnum):
    """CONFIGURE parameter ids; ranges and defaults are in CONFIG_PARAMS."""

    OPEN_TIME_MS = 1
    CLOSE_TIME_MS = 2
    SPRING_CHARGE_MS = 3
    ANTI_PUMP = 4
    TRIP_CIRCUIT_SUPERVISION = 5
    ALARM_BLOCKS_CLOSE = 6
    EVENT_RETRY_MS = 7


@dataclass(frozen=True, slots=True)
class ParamRange:
    minimum: int
    maximum: int
    default: int
    unit: str


CONFIG_PARAMS: Mapping[ConfigParam, ParamRange] = {
    ConfigParam.OPEN_TIME_MS: ParamRange(5, 1000, 30, "ms"),
    ConfigParam.CLOSE_TIME_MS: ParamRange(5, 1000, 60, "ms"),
    ConfigParam.SPRING_CHARGE_MS: ParamRange(0, 60_000, 5_000, "ms"),
    ConfigParam.ANTI_PUMP: ParamRange(0, 1, 1, "bool"),
    ConfigParam.TRIP_CIRCUIT_SUPERVISION: ParamRange(0, 1, 1, "bool"),
    ConfigParam.ALARM_BLOCKS_CLOSE: ParamRange(0, 1, 1, "bool"),
    ConfigParam.EVENT_RETRY_MS: ParamRange(10, 10_000, 200, "ms"),
}


class StatusFlag(IntFlag):
    """Bits of the ACK `flags` field: the device's state in one u16."""

    SPRING_CHARGED = 1 << 0
    TRIP_CIRCUIT_HEALTHY = 1 << 1
    GAS_PRESSURE_LOW = 1 << 2
    CLOSE_BLOCKED = 1 << 3
    ANTI_PUMP_LOCKOUT = 1 << 4
    OPERATING = 1 << 5
    TRIP_COIL = 1 << 6
    CLOSE_COIL = 1 << 7
    EVENT_OVERFLOW = 1 << 8
    SYNCED = 1 << 9


def dbpos_from_contacts(contact_52a: bool, contact_52b: bool) -> Dbpos:
    """Dbpos from the auxiliary contacts (52a closed when the breaker is closed, 52b opposite)."""
    return Dbpos((int(bool(contact_52a)) << 1) | int(bool(contact_52b)))


# ---------------------------------------------------------------- typed messages


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every message; `seq` is the header sequence number (meaning depends on kind)."""

    seq: int


@dataclass(frozen=True, slots=True)
class Ping(Message):
    pass


@dataclass(frozen=True, slots=True)
class ReadStatus(Message):
    pass


@dataclass(frozen=True, slots=True)
class Trip(Message):
    pass


@dataclass(frozen=True, slots=True)
class Close(Message):
    pass


@dataclass(frozen=True, slots=True)
class SetOutput(Message):
    mask: int  # which outputs to change (bit i = output i)
    values: int  # their new values (bits outside mask are ignored, must be 0)


@dataclass(frozen=True, slots=True)
class Reset(Message):
    mode: ResetMode


@dataclass(frozen=True, slots=True)
class Configure(Message):
    param: ConfigParam
    value: int


@dataclass(frozen=True, slots=True)
class EventAck(Message):
    next_command_seq: int  # the seq the controller will use next (device's stale baseline)


@dataclass(frozen=True, slots=True)
class PowerUp(Message):
    boot_counter: int
    cause: ResetCause


@dataclass(frozen=True, slots=True)
class PositionChange(Message):
    position: Dbpos
    previous: Dbpos
    cause: PositionCause
    operate_ms: int  # coil energised -> end position; 0 when not commanded


@dataclass(frozen=True, slots=True)
class Alarm(Message):
    alarm: AlarmId
    active: bool


@dataclass(frozen=True, slots=True)
class SpringCharged(Message):
    charged: bool  # False: discharged (after a close), True: charged again


@dataclass(frozen=True, slots=True)
class InputChange(Message):
    inputs: int  # all 16 digital inputs now
    changed: int  # which of them changed since the previous report


@dataclass(frozen=True, slots=True)
class Ack(Message):
    command: MsgType  # type of the command answered
    result: AckResult
    position: Dbpos
    flags: int  # StatusFlag bits
    inputs: int
    outputs: int
    boot_counter: int
    event_seq: int  # seq of the newest event generated since boot (POWER_UP is seq 1)


@dataclass(frozen=True, slots=True)
class Nack(Message):
    reason: NackReason
    rejected_type: int  # the type byte received, even if unknown
    detail: int  # reason-specific, see SPEC (supported version, expected length, offset)
    boot_counter: int


# ---------------------------------------------------------------- the table


def _codes(enum: type[IntEnum]) -> dict[int, IntEnum]:
    return {int(m): m for m in enum}


_BOOL = {0: False, 1: True}
_COMMANDS = {int(m): m for m in MsgType if 0x01 <= m <= 0x1F}
U8, U16, U32 = "B", "H", "I"
Field = tuple[str, str, Mapping[int, object] | None]  # name, struct code, allowed codes

# code, class, kind, needs_sync, body fields
TABLE: tuple[tuple[MsgType, type[Message], Kind, bool, tuple[Field, ...]], ...] = (
    (MsgType.PING, Ping, Kind.COMMAND, False, ()),
    (MsgType.READ_STATUS, ReadStatus, Kind.COMMAND, False, ()),
    # TRIP is the safe direction and idempotent: it is executed even before resync.
    (MsgType.TRIP, Trip, Kind.COMMAND, False, ()),
    (MsgType.CLOSE, Close, Kind.COMMAND, True, ()),
    (
        MsgType.SET_OUTPUT,
        SetOutput,
        Kind.COMMAND,
        True,
        (("mask", U16, None), ("values", U16, None)),
    ),
    (MsgType.RESET, Reset, Kind.COMMAND, True, (("mode", U8, _codes(ResetMode)),)),
    (
        MsgType.CONFIGURE,
        Configure,
        Kind.COMMAND,
        True,
        (("param", U8, _codes(ConfigParam)), ("value", U32, None)),
    ),
    (MsgType.EVENT_ACK, EventAck, Kind.EVENT_ACK, False, (("next_command_seq", U16, None),)),
    (
        MsgType.POWER_UP,
        PowerUp,
        Kind.EVENT,
        False,
        (("boot_counter", U16, None), ("cause", U8, _codes(ResetCause))),
    ),
    (
        MsgType.POSITION_CHANGE,
        PositionChange,
        Kind.EVENT,
        False,
        (
            ("position", U8, _codes(Dbpos)),
            ("previous", U8, _codes(Dbpos)),
            ("cause", U8, _codes(PositionCause)),
            ("operate_ms", U16, None),
        ),
    ),
    (
        MsgType.ALARM,
        Alarm,
        Kind.EVENT,
        False,
        (("alarm", U8, _codes(AlarmId)), ("active", U8, _BOOL)),
    ),
    (MsgType.SPRING_CHARGED, SpringCharged, Kind.EVENT, False, (("charged", U8, _BOOL),)),
    (
        MsgType.INPUT_CHANGE,
        InputChange,
        Kind.EVENT,
        False,
        (("inputs", U16, None), ("changed", U16, None)),
    ),
    (
        MsgType.ACK,
        Ack,
        Kind.RESPONSE,
        False,
        (
            ("command", U8, _COMMANDS),
            ("result", U8, _codes(AckResult)),
            ("position", U8, _codes(Dbpos)),
            ("flags", U16, None),
            ("inputs", U16, None),
            ("outputs", U16, None),
            ("boot_counter", U16, None),
            ("event_seq", U16, None),
        ),
    ),
    (
        MsgType.NACK,
        Nack,
        Kind.RESPONSE,
        False,
        (
            ("reason", U8, _codes(NackReason)),
            ("rejected_type", U8, None),
            ("detail", U8, None),
            ("boot_counter", U16, None),
        ),
    ),
)


# Rules across fields of one body, checked by encode and decode like field codes are:
# (field blamed, predicate over the body values in table order, why it must hold).
Constraint = tuple[str, Callable[[tuple[Any, ...]], bool], str]
CONSTRAINTS: Mapping[MsgType, tuple[Constraint, ...]] = {
    MsgType.SET_OUTPUT: (
        ("values", lambda v: v[1] & ~v[0] == 0, "sets bits outside mask (they must be 0)"),
    ),
}


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One compiled row: everything encode/decode need, precomputed once at import."""

    code: MsgType
    cls: type[Message]
    kind: Kind
    needs_sync: bool
    fields: tuple[Field, ...]
    full: struct.Struct  # header + body
    size: int  # whole payload including CRC
    offsets: tuple[int, ...]  # payload offset of each body field
    checked: tuple[tuple[int, Mapping[int, object]], ...]  # (field index, allowed codes)
    get: Callable[[Message], tuple[Any, ...]]
    constraints: tuple[tuple[int, Callable[[tuple[Any, ...]], bool], str], ...]

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def body_size(self) -> int:
        return self.size - MIN_PAYLOAD


def _compile(row: tuple[MsgType, type[Message], Kind, bool, tuple[Field, ...]]) -> MessageSpec:
    code, cls, kind, needs_sync, body = row
    names = tuple(f[0] for f in body)
    declared = tuple(f.name for f in fields(cls))[1:]
    if names != declared:  # table and dataclass must agree, or nothing works: fail at import
        raise TypeError(f"{code.name}: table fields {names} != {cls.__name__} fields {declared}")
    fmt = HEADER.format + "".join(f[1] for f in body)
    offsets, off = [], HEADER_SIZE
    for f in body:
        offsets.append(off)
        off += struct.calcsize(">" + f[1])
    size = struct.calcsize(fmt) + CRC_SIZE
    if size > MAX_PAYLOAD:
        raise TypeError(f"{code.name}: payload {size} bytes exceeds MAX_PAYLOAD {MAX_PAYLOAD}")
    if len(names) == 0:
        get: Callable[[Message], tuple[Any, ...]] = lambda _m: ()  # noqa: E731
    elif len(names) == 1:
        one = attrgetter(names[0])
        get = lambda m: (one(m),)  # noqa: E731
    else:
        get = attrgetter(*names)
    checked = tuple((i, f[2]) for i, f in enumerate(body) if f[2] is not None)
    constraints = tuple(
        (names.index(field), rule, why) for field, rule, why in CONSTRAINTS.get(code, ())
    )
    return MessageSpec(
        code,
        cls,
        kind,
        needs_sync,
        body,
        struct.Struct(fmt),
        size,
        tuple(offsets),
        checked,
        get,
        constraints,
    )


SPECS: Mapping[int, MessageSpec] = {int(row[0]): _compile(row) for row in TABLE}
_BY_CLASS: Mapping[type[Message], MessageSpec] = {s.cls: s for s in SPECS.values()}


def spec_for(msg_or_code: Message | int) -> MessageSpec:
    """The table row for a message object or a type code (KeyError if there is none)."""
    if isinstance(msg_or_code, Message):
        return _BY_CLASS[type(msg_or_code)]
    return SPECS[msg_or_code]


# ---------------------------------------------------------------- encode / decode


def encode_payload(msg: Message) -> bytes:
    """Header + body + CRC for ``msg`` (not yet COBS-framed); `EncodeError` if unencodable."""
    spec = _BY_CLASS.get(type(msg))
    if spec is None:
        raise EncodeError(f"{type(msg).__name__} is not a device-link message type")
    values = spec.get(msg)
    for i, allowed in spec.checked:
        if values[i] not in allowed:
            name = spec.fields[i][0]
            raise EncodeError(
                f"{spec.name}.{name}={values[i]!r} is not one of {sorted(map(int, allowed))}"
            )
    try:
        packed = spec.full.pack(VERSION, spec.code, msg.seq, *values)
    except (struct.error, TypeError) as exc:
        raise EncodeError(f"{spec.name}: cannot pack {msg!r}: {exc}") from None
    for i, rule, why in spec.constraints:
        if not rule(values):
            raise EncodeError(f"{spec.name}.{spec.fields[i][0]} {why}: {msg!r}")
    return packed + _crc.crc16(packed).to_bytes(CRC_SIZE, "big")


def decode_payload(payload: bytes, accept: frozenset[Kind] | None = None) -> Message:
    """Parse one COBS-decoded payload; raises a `LinkProtocolError` naming what and where.

    Checks run in the SPEC's order: length, CRC, version, type, direction (only kinds in
    ``accept``, when given), body length, field codes. Once the CRC has passed the error
    carries ``seq``/``msg_type`` so a device can NACK it.
    """
    n = len(payload)
    if n < MIN_PAYLOAD:
        raise FrameTooShort(
            f"payload is {n} bytes, the minimum is {MIN_PAYLOAD} (header + CRC)",
            offset=n,
            frame=payload,
        )
    if _crc.crc16(payload) != _crc.RESIDUE:
        raise _crc_mismatch(payload)
    version, code, seq = HEADER.unpack_from(payload)
    head = {"seq": seq, "msg_type": code, "version": version, "frame": payload}
    spec = SPECS.get(code)
    if (
        version != VERSION
        or spec is None
        or n != spec.size
        or (accept is not None and spec.kind not in accept)
    ):
        raise _bad_header(version, code, spec, accept, n, head)
    values: tuple[Any, ...] | list[Any] = spec.full.unpack_from(payload)
    if spec.checked:
        values = list(values)
        for i, allowed in spec.checked:
            raw = values[i + 3]
            try:
                values[i + 3] = allowed[raw]
            except KeyError:
                name = spec.fields[i][0]
                raise BadFieldValue(
                    f"{spec.name}.{name} holds {raw}, allowed codes are {sorted(allowed)}",
                    offset=spec.offsets[i],
                    **head,
                ) from None
    body = tuple(values[3:])
    for i, rule, why in spec.constraints:
        if not rule(body):
            raise BadFieldValue(
                f"{spec.name}.{spec.fields[i][0]} {why}", offset=spec.offsets[i], **head
            )
    return spec.cls(seq, *body)


def _crc_mismatch(payload: bytes) -> BadCrc:
    """The CRC-16 the payload carries against the one its bytes give."""
    got = int.from_bytes(payload[-CRC_SIZE:], "big")
    want = _crc.crc16(payload[:-CRC_SIZE])
    return BadCrc(
        f"CRC-16 mismatch: frame carries 0x{got:04X}, bytes give 0x{want:04X}",
        offset=len(payload) - CRC_SIZE,
        frame=payload,
    )


def _bad_header(
    version: int, code: int, spec: Any, accept: frozenset[Kind] | None, n: int,
    head: dict[str, Any],
) -> LinkProtocolError:  # fmt: skip
    """The first header check that failed, in the SPEC's order: version, type, direction,
    body length."""
    if version != VERSION:
        return UnknownVersion(
            f"protocol version {version} is not supported (this side speaks {VERSION})",
            offset=0,
            **head,
        )
    if spec is None:
        return UnknownType(f"type code 0x{code:02X} is not defined", offset=1, **head)
    if accept is not None and spec.kind not in accept:
        return WrongDirection(
            f"{spec.name} is a {spec.kind.value} message, not accepted by this side",
            offset=1,
            **head,
        )
    return BadBodyLength(
        f"{spec.name} body is {n - MIN_PAYLOAD} bytes, its layout needs {spec.body_size}",
        offset=HEADER_SIZE,
        **head,
    )


# ---------------------------------------------------------------- errors -> NACK

_NACK_FOR_ERROR: Mapping[ErrorKind, NackReason] = {
    ErrorKind.UNKNOWN_VERSION: NackReason.UNKNOWN_VERSION,
    ErrorKind.UNKNOWN_TYPE: NackReason.UNKNOWN_TYPE,
    ErrorKind.WRONG_DIRECTION: NackReason.UNEXPECTED_TYPE,
    ErrorKind.BAD_LENGTH: NackReason.BAD_LENGTH,
    ErrorKind.BAD_VALUE: NackReason.BAD_VALUE,
}


def _nack_detail(err: LinkProtocolError) -> int:
    """The NACK `detail` byte: what the sender needs to fix the frame (see SPEC)."""
    if err.kind is ErrorKind.UNKNOWN_VERSION:
        return VERSION
    if err.kind is ErrorKind.BAD_LENGTH and err.msg_type is not None and err.msg_type in SPECS:
        return SPECS[err.msg_type].body_size
    if err.kind is ErrorKind.BAD_VALUE:
        return err.offset
    return 0


def nack_for(err: LinkProtocolError, boot_counter: int) -> Nack | None:
    """The NACK a device sends for ``err``, or None when the frame must be dropped silently.

    Frames whose CRC failed (or that are not frames at all) are never answered: their
    seq cannot be trusted, and a NACK for the wrong seq could be taken as an answer to a
    different command. The sender's retry timer covers them.
    """
    reason = _NACK_FOR_ERROR.get(err.kind)
    if reason is None or err.seq is None or err.msg_type is None:
        return None
    return Nack(err.seq, reason, err.msg_type, _nack_detail(err), boot_counter)
