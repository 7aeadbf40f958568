"""libiec61850 (pyiec61850-ng 1.6.1) as an independent GOOSE peer: publisher, receiver, parser.

Why: our codec must agree with an implementation nobody on this project wrote. This
module drives libiec61850's own GoosePublisher / GooseReceiver / GooseSubscriber and
turns what they see into typed JSON, so a test can compare it with what `protocols.goose`
decodes. It imports nothing from `protocols` on purpose (an oracle must not share code).

Typed JSON (one dict per MMS value; type names are the MMS Data choice names):

    {"type": "boolean", "value": true}         {"type": "integer", "value": -5}
    {"type": "unsigned", "value": 7}           (libiec61850 handles at most 32 bits)
    {"type": "floating-point", "bits": 32|64, "value": 1.5}
    {"type": "bit-string", "bits": "0110"}     first character = first bit on the wire
    {"type": "octet-string", "hex": "0102"}    {"type": "visible-string", "value": "abc"}
    {"type": "mMSString", "value": "abc"}
    {"type": "utc-time", "seconds": s, "fraction": f24, "quality": q}
    {"type": "binary-time", "ms_of_day": ms, "days": d}   ("days": null -> 4-octet form)
    {"type": "structure", "items": [...]}      {"type": "array", "items": [...]}

Run as a script inside a namespace (`ip netns exec NS python -m goosectl.lab.iec61850_peer`):

    publish --iface X --appid 0x1000 --dst 01:0c:cd:01:00:01 [--vlan-id 10 --vlan-prio 4 |
            --no-vlan] --gocb-ref R --dataset D --go-id G --conf-rev N --tal MS
            [--test/--simulation] [--nds-com] [--st-num N] [--sq-num N] [--repeat K]
            [--interval-ms I] --values JSON      (JSON: a list of data sets; each data set
            after the first is a new state: stNum+1, sqNum 0; each is sent K times)
    receive --iface X --count N [--timeout S] [--gocb-ref R] [--prime-gocb-ref P] --json
            prints {"ready": true} once listening, {"primed": true} on the first frame
            with gocbRef P (primers are not counted), then one JSON line per message.

In-memory parsing works: `GooseReceiver_handleMessage` is called through ctypes on the
libiec61850 shared library that the SWIG module already loaded (the SWIG wrapper rejects
Python bytes for its ``uint8_t *`` argument), on a receiver that was never started, with
an observer-mode subscriber (it accepts any gocbRef). `parse_with_libiec61850(frame)`
returns the message dict, or None if libiec61850 did not report a message for the frame.

libiec61850 behaviour observed here (1.6.1 via pyiec61850-ng 1.6.1.10), asserted in
tests/interop/test_libiec61850_codec.py:

- `GooseSubscriber_getVlanPrio` returns 0 for every frame (tried PCP 1, 4, 5, 7); the
  VLAN id it reports is right.
- On a live interface its receiver reports every frame as untagged (vlanSet false, id 0):
  the kernel strips the tag before a packet socket reads it and libiec61850 does not
  read PACKET_AUXDATA. Only an inline tag (in-memory parsing) is seen.
- A data set containing an mMSString (tag 0x90) is not decoded by its subscriber: the
  message is reported valid with parse error 0, but with no data set values. Its
  publisher does encode mMSString (tag 0x90) correctly.
- `MmsValue_setBinaryTime` counts from 1984-01-01 and clamps earlier instants to 0, also
  for the 4-octet time-of-day form.
- Frames arriving in the first ~10-20 ms after `GooseReceiver_startThreadless` returns
  are lost (hence the primer handshake of the ``receive`` command).
- Its publisher writes the VLAN priority correctly; sending sets sqNum+1 after each
  publish and `GoosePublisher_increaseStNum` sets stNum+1, sqNum 0.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import struct
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import Any

BINARY_TIME_EPOCH_MS = 441_763_200_000  # 1984-01-01T00:00:00Z in Unix milliseconds
DAY_MS = 86_400_000


class PeerError(RuntimeError):
    """libiec61850 refused something (bad value, interface, permissions); says what."""


# -- loading -------------------------------------------------------------------------------


@cache
def bindings() -> Any:
    """The SWIG module (`pyiec61850.pyiec61850`); ImportError if not installed."""
    import pyiec61850.pyiec61850 as iec

    return iec


_LISTENER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


@cache
def native() -> ctypes.CDLL:
    """The libiec61850 shared library the SWIG module loaded, opened again with ctypes.

    Found through /proc/self/maps so it is the very same copy (same globals), whatever
    directory the wheel put it in.
    """
    bindings()
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libiec61850" in line and "/" in line}
    if not paths:
        raise PeerError("libiec61850 shared library is not mapped after importing pyiec61850")
    lib = ctypes.CDLL(sorted(paths)[0])
    lib.GooseReceiver_handleMessage.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.GooseReceiver_handleMessage.restype = None
    lib.GooseSubscriber_setListener.argtypes = [ctypes.c_void_p, _LISTENER, ctypes.c_void_p]
    lib.GooseSubscriber_setListener.restype = None
    return lib


def _addr(swig_ptr: Any) -> int:
    return int(swig_ptr)


# -- typed JSON <-> MmsValue ---------------------------------------------------------------


def to_mms(value: dict[str, Any], where: str = "value") -> Any:
    """Build a libiec61850 MmsValue from typed JSON; errors name the path of the bad value."""
    iec = bindings()
    if not isinstance(value, dict) or "type" not in value:
        raise PeerError(f"{where}: expected a typed value like {{'type': 'boolean', ...}}")
    kind = value["type"]
    make = _TO_MMS.get(kind) if isinstance(kind, str) else None
    if make is None:
        raise PeerError(f"{where}: type {kind!r} is not one libiec61850 can publish")
    try:
        return make(iec, value, where)
    except (KeyError, ValueError, TypeError, struct.error, OverflowError) as exc:
        raise PeerError(f"{where}: bad {kind} value {value!r}: {exc}") from None


def _unsigned_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    n = int(value["value"])
    if not 0 <= n < 1 << 32:
        raise PeerError(f"{where}: libiec61850 unsigned holds 0..2**32-1, got {n}")
    mms = iec.MmsValue_newUnsigned(32)
    iec.MmsValue_setUint32(mms, n)
    return mms


def _float_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    bits = int(value.get("bits", 32))
    if bits == 32:
        return iec.MmsValue_newFloat(float(value["value"]))
    if bits == 64:
        return iec.MmsValue_newDouble(float(value["value"]))
    raise PeerError(f"{where}: floating-point bits must be 32 or 64, got {bits}")


def _bit_string_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    text = str(value["bits"])
    if text.strip("01"):
        raise PeerError(f"{where}: bit-string must be 0/1 characters, got {text!r}")
    mms = iec.MmsValue_newBitString(len(text))
    for i, ch in enumerate(text):
        iec.MmsValue_setBitStringBit(mms, i, ch == "1")
    return mms


def _octet_string_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    data = bytes.fromhex(value["hex"])
    mms = iec.MmsValue_newOctetString(len(data), max(1, len(data)))
    for i, b in enumerate(data):
        iec.MmsValue_setOctetStringOctet(mms, i, b)
    return mms


def _utc_time_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    mms = iec.MmsValue_newUtcTime(0)
    raw = (
        struct.pack(">I", value["seconds"])
        + int(value.get("fraction", 0)).to_bytes(3, "big")
        + bytes((int(value.get("quality", 0)),))
    )
    ctypes.memmove(_addr(iec.MmsValue_getUtcTimeBuffer(mms)), raw, 8)
    return mms


def _binary_time_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    days = value.get("days")
    mms = iec.MmsValue_newBinaryTime(days is None)
    ms = int(value["ms_of_day"])
    # libiec61850 counts from 1984-01-01 and clamps earlier instants to 0, so even
    # the 4-octet (time of day) form needs an instant on or after that epoch.
    iec.MmsValue_setBinaryTime(mms, BINARY_TIME_EPOCH_MS + int(days or 0) * DAY_MS + ms)
    return mms


def _items_mms(iec: Any, value: dict[str, Any], where: str) -> Any:
    items = value["items"]
    make = (
        iec.MmsValue_createEmptyStructure
        if value["type"] == "structure"
        else iec.MmsValue_createEmptyArray
    )
    mms = make(len(items))
    for i, item in enumerate(items):
        iec.MmsValue_setElement(mms, i, to_mms(item, f"{where}.items[{i}]"))
    return mms


#: typed JSON's type -> the builder of its MmsValue (iec, value, where)
_TO_MMS: dict[str, Callable[[Any, dict[str, Any], str], Any]] = {
    "boolean": lambda iec, v, _: iec.MmsValue_newBoolean(bool(v["value"])),
    "integer": lambda iec, v, _: iec.MmsValue_newIntegerFromInt64(int(v["value"])),
    "unsigned": _unsigned_mms,
    "floating-point": _float_mms,
    "bit-string": _bit_string_mms,
    "octet-string": _octet_string_mms,
    "visible-string": lambda iec, v, _: iec.MmsValue_newVisibleString(str(v["value"])),
    "mMSString": lambda iec, v, _: iec.MmsValue_newMmsString(str(v["value"])),
    "utc-time": _utc_time_mms,
    "binary-time": _binary_time_mms,
    "structure": _items_mms,
    "array": _items_mms,
}


def from_mms(mms: Any) -> dict[str, Any]:
    """Typed JSON of an MmsValue as libiec61850 decoded it."""
    iec = bindings()
    kind = iec.MmsValue_getType(mms)
    if kind == iec.MMS_BOOLEAN:
        return {"type": "boolean", "value": bool(iec.MmsValue_getBoolean(mms))}
    if kind == iec.MMS_INTEGER:
        return {"type": "integer", "value": iec.MmsValue_toInt64(mms)}
    if kind == iec.MMS_UNSIGNED:
        return {"type": "unsigned", "value": iec.MmsValue_toUint32(mms)}
    if kind == iec.MMS_FLOAT:
        bits = 64 if iec.MmsValue_getMaxEncodedSize(mms) > 7 else 32
        return {"type": "floating-point", "bits": bits, "value": iec.MmsValue_toDouble(mms)}
    if kind == iec.MMS_BIT_STRING:
        n = iec.MmsValue_getBitStringSize(mms)
        text = "".join("1" if iec.MmsValue_getBitStringBit(mms, i) else "0" for i in range(n))
        return {"type": "bit-string", "bits": text}
    if kind == iec.MMS_OCTET_STRING:
        size = iec.MmsValue_getOctetStringSize(mms)
        raw = ctypes.string_at(_addr(iec.MmsValue_getOctetStringBuffer(mms)), size)
        return {"type": "octet-string", "hex": raw.hex()}
    if kind == iec.MMS_VISIBLE_STRING:
        return {"type": "visible-string", "value": iec.MmsValue_toString(mms)}
    if kind == iec.MMS_STRING:
        return {"type": "mMSString", "value": iec.MmsValue_toString(mms)}
    if kind == iec.MMS_UTC_TIME:
        raw = ctypes.string_at(_addr(iec.MmsValue_getUtcTimeBuffer(mms)), 8)
        return {
            "type": "utc-time",
            "seconds": int.from_bytes(raw[:4], "big"),
            "fraction": int.from_bytes(raw[4:7], "big"),
            "quality": raw[7],
        }
    if kind == iec.MMS_BINARY_TIME:
        ms = iec.MmsValue_getBinaryTimeAsUtcMs(mms)
        if iec.MmsValue_getMaxEncodedSize(mms) <= 6:
            return {"type": "binary-time", "ms_of_day": ms, "days": None}
        days, of_day = divmod(ms - BINARY_TIME_EPOCH_MS, DAY_MS)
        return {"type": "binary-time", "ms_of_day": of_day, "days": days}
    if kind in (iec.MMS_STRUCTURE, iec.MMS_ARRAY):
        items = [
            from_mms(iec.MmsValue_getElement(mms, i)) for i in range(iec.MmsValue_getArraySize(mms))
        ]
        return {"type": "structure" if kind == iec.MMS_STRUCTURE else "array", "items": items}
    return {"type": f"unsupported:{iec.MmsValue_getTypeString(mms)}"}


def _values_list(values: Sequence[dict[str, Any]]) -> Any:
    iec = bindings()
    linked = iec.LinkedList_create()
    for i, value in enumerate(values):
        iec.LinkedList_add(linked, to_mms(value, f"values[{i}]"))
    return linked


# -- subscriber state -> message dict ------------------------------------------------------


def _message(sub: Any) -> dict[str, Any]:
    iec = bindings()
    values = iec.GooseSubscriber_getDataSetValues(sub)
    decoded = None
    if values is not None and iec.GooseSubscriber_isValid(sub):
        decoded = [from_mms(iec.MmsValue_getElement(values, i))
                   for i in range(iec.MmsValue_getArraySize(values))]  # fmt: skip
    return {
        "gocbRef": iec.GooseSubscriber_getGoCbRef(sub),
        "datSet": iec.GooseSubscriber_getDataSet(sub),
        "goID": iec.GooseSubscriber_getGoId(sub),
        "appId": iec.GooseSubscriber_getAppId(sub),
        "stNum": iec.GooseSubscriber_getStNum(sub),
        "sqNum": iec.GooseSubscriber_getSqNum(sub),
        "timeAllowedToLive": iec.GooseSubscriber_getTimeAllowedToLive(sub),
        "confRev": iec.GooseSubscriber_getConfRev(sub),
        "test": bool(iec.GooseSubscriber_isTest(sub)),
        "ndsCom": bool(iec.GooseSubscriber_needsCommission(sub)),
        "t_ms": iec.GooseSubscriber_getTimestamp(sub),
        "vlanSet": bool(iec.GooseSubscriber_isVlanSet(sub)),
        "vlanId": iec.GooseSubscriber_getVlanId(sub),
        "vlanPrio": iec.GooseSubscriber_getVlanPrio(sub),
        "valid": bool(iec.GooseSubscriber_isValid(sub)),
        "parseError": iec.GooseSubscriber_getParseError(sub),
        "values": decoded,
    }


class _Subscription:
    """A GooseReceiver with one subscriber (observer mode unless a gocbRef is given).

    The listener is a ctypes callback on the native library, so each parsed message is
    turned into a dict at once, before the next one overwrites the subscriber's fields.
    """

    def __init__(self, gocb_ref: str | None = None) -> None:
        iec, lib = bindings(), native()
        self.receiver = iec.GooseReceiver_create()
        self.subscriber = iec.GooseSubscriber_create(gocb_ref or "observer", None)
        if gocb_ref is None:
            iec.GooseSubscriber_setObserver(self.subscriber)
        self.messages: list[dict[str, Any]] = []
        self.capture = True  # False: only count messages (benchmarks time the C parse)
        self.count = 0
        self._callback = _LISTENER(self._on_message)  # kept alive as long as self
        lib.GooseSubscriber_setListener(_addr(self.subscriber), self._callback, None)
        iec.GooseReceiver_addSubscriber(self.receiver, self.subscriber)
        self._started = False

    def _on_message(self, _sub: int, _param: int) -> None:
        self.count += 1
        if self.capture:
            self.messages.append(_message(self.subscriber))

    def handle(self, frame: bytes) -> None:
        native().GooseReceiver_handleMessage(_addr(self.receiver), frame, len(frame))

    def start(self, iface: str) -> None:
        iec = bindings()
        iec.GooseReceiver_setInterfaceId(self.receiver, iface)
        eth = iec.GooseReceiver_startThreadless(self.receiver)
        if eth is None:
            raise PeerError(
                f"libiec61850 could not open {iface!r} (missing interface or no CAP_NET_RAW)"
            )
        # The receiver owns this socket and closes it in stopThreadless; without disown()
        # SWIG prints a "memory leak" warning on stdout, which would corrupt the JSON lines.
        eth.disown()
        self._started = True

    def tick(self) -> bool:
        return bool(bindings().GooseReceiver_tick(self.receiver))

    def close(self) -> None:
        iec = bindings()
        if self._started:
            iec.GooseReceiver_stopThreadless(self.receiver)
            self._started = False
        if self.receiver is not None:
            iec.GooseReceiver_destroy(self.receiver)  # also destroys the subscriber
            self.receiver = None


# -- in-memory parsing ---------------------------------------------------------------------


class LibIec61850Parser:
    """Reusable in-memory parser; `handle` is the bare C call for benchmarks."""

    def __init__(self) -> None:
        self._sub = _Subscription()
        self._lib = native()
        self._receiver = _addr(self._sub.receiver)

    def handle(self, frame: bytes) -> int:
        """Only libiec61850's parse plus a counting callback; returns messages seen so far.

        Nothing is converted to Python; the listener (a ctypes callback) costs about a
        microsecond of the measured time, which a benchmark should state.
        """
        self._sub.capture = False
        self._lib.GooseReceiver_handleMessage(self._receiver, frame, len(frame))
        return self._sub.count

    def parse(self, frame: bytes) -> dict[str, Any] | None:
        """Parse one frame; the message dict, or None if libiec61850 reported nothing."""
        self._sub.messages.clear()
        self._sub.capture = True
        self._lib.GooseReceiver_handleMessage(self._receiver, frame, len(frame))
        return self._sub.messages[-1] if self._sub.messages else None

    def close(self) -> None:
        self._sub.close()


def parse_with_libiec61850(frame: bytes) -> dict[str, Any] | None:
    """Parse one frame with a fresh libiec61850 receiver (its data set adapts to the frame)."""
    parser = LibIec61850Parser()
    try:
        return parser.parse(frame)
    finally:
        parser.close()


# -- live publisher and receiver -----------------------------------------------------------


class Publisher:
    """A libiec61850 GoosePublisher on an interface (needs CAP_NET_RAW there)."""

    def __init__(
        self,
        iface: str,
        *,
        appid: int,
        dst: bytes,
        vlan_id: int = 0,
        vlan_prio: int = 4,
        use_vlan: bool = True,
        gocb_ref: str,
        dataset: str,
        go_id: str,
        conf_rev: int = 1,
        tal_ms: int = 2000,
        simulation: bool = False,
        nds_com: bool = False,
    ) -> None:
        iec = bindings()
        params = iec.CommParameters()
        params.appId = appid
        params.vlanId = vlan_id
        params.vlanPriority = vlan_prio
        iec.CommParameters_setDstAddress(params, *dst)
        self._pub = iec.GoosePublisher_createEx(params, iface, use_vlan)
        if self._pub is None:
            raise PeerError(
                f"libiec61850 could not publish on {iface!r} (no such interface or no CAP_NET_RAW)"
            )
        iec.GoosePublisher_setGoCbRef(self._pub, gocb_ref)
        iec.GoosePublisher_setDataSetRef(self._pub, dataset)
        iec.GoosePublisher_setGoID(self._pub, go_id)
        iec.GoosePublisher_setConfRev(self._pub, conf_rev)
        iec.GoosePublisher_setTimeAllowedToLive(self._pub, tal_ms)
        iec.GoosePublisher_setSimulation(self._pub, simulation)
        iec.GoosePublisher_setNeedsCommission(self._pub, nds_com)

    def set_numbers(self, st_num: int | None = None, sq_num: int | None = None) -> None:
        iec = bindings()
        if st_num is not None:
            iec.GoosePublisher_setStNum(self._pub, st_num)
        if sq_num is not None:
            iec.GoosePublisher_setSqNum(self._pub, sq_num)

    def new_state(self) -> None:
        """stNum + 1, sqNum 0 (libiec61850's own rule)."""
        bindings().GoosePublisher_increaseStNum(self._pub)

    def publish(self, values: Sequence[dict[str, Any]]) -> None:
        iec = bindings()
        linked = _values_list(values)
        try:
            if iec.GoosePublisher_publish(self._pub, linked) != 0:
                raise PeerError("GoosePublisher_publish failed")
        finally:
            iec.LinkedList_destroyDeep_MmsValueDelete(linked)

    def close(self) -> None:
        if self._pub is not None:
            bindings().GoosePublisher_destroy(self._pub)
            self._pub = None


@contextlib.contextmanager
def receiving(iface: str, gocb_ref: str | None = None) -> Iterator[_Subscription]:
    """A started threadless receiver; call `.tick()` to process queued frames."""
    sub = _Subscription(gocb_ref)
    try:
        sub.start(iface)
        yield sub
    finally:
        sub.close()


def receive(
    iface: str,
    count: int,
    timeout_s: float,
    gocb_ref: str | None = None,
    on_ready=None,
    prime_gocb_ref: str | None = None,
    on_primed=None,
) -> list[dict[str, Any]]:
    """Collect up to ``count`` messages (fewer if ``timeout_s`` passes first).

    Observed here: frames arriving in the first ~10-20 ms after GooseReceiver_start-
    Threadless returns are not delivered. With ``prime_gocb_ref`` the caller sends primer
    frames with that gocbRef until ``on_primed`` fires; primers are not counted.
    """
    with receiving(iface, gocb_ref) as sub:
        if on_ready:
            on_ready()
        deadline = time.monotonic() + timeout_s
        primed = prime_gocb_ref is None
        kept: list[dict[str, Any]] = []
        while len(kept) < count and time.monotonic() < deadline:
            if not sub.tick():
                time.sleep(0.0005)
                continue
            for msg in sub.messages:
                if prime_gocb_ref is not None and msg["gocbRef"] == prime_gocb_ref:
                    if not primed and on_primed:
                        on_primed()
                    primed = True
                elif primed:
                    kept.append(msg)
            sub.messages.clear()
        return kept[:count]


# -- command line --------------------------------------------------------------------------


def _int(text: str) -> int:
    return int(text, 0)


def _mac(text: str) -> bytes:
    raw = bytes.fromhex(text.replace(":", "").replace("-", ""))
    if len(raw) != 6:
        raise argparse.ArgumentTypeError(f"not a MAC address: {text!r}")
    return raw


def _json_default(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, default=_json_default) + "\n")
    sys.stdout.flush()


def _cmd_publish(args: argparse.Namespace) -> int:
    datasets = json.loads(args.values)
    if not isinstance(datasets, list) or not all(isinstance(d, list) for d in datasets):
        raise PeerError("--values must be a JSON list of data sets (each a list of values)")
    pub = Publisher(
        args.iface,
        appid=args.appid,
        dst=args.dst,
        vlan_id=args.vlan_id,
        vlan_prio=args.vlan_prio,
        use_vlan=not args.no_vlan,
        gocb_ref=args.gocb_ref,
        dataset=args.dataset,
        go_id=args.go_id,
        conf_rev=args.conf_rev,
        tal_ms=args.tal,
        simulation=args.simulation,
        nds_com=args.nds_com,
    )
    try:
        pub.set_numbers(args.st_num, args.sq_num)
        for k, values in enumerate(datasets):
            if k:
                pub.new_state()
            for r in range(args.repeat):
                pub.publish(values)
                _emit({"published": k, "repeat": r})
                if args.interval_ms:
                    time.sleep(args.interval_ms / 1000)
    finally:
        pub.close()
    return 0


def _cmd_receive(args: argparse.Namespace) -> int:
    messages = receive(
        args.iface,
        args.count,
        args.timeout,
        args.gocb_ref,
        on_ready=lambda: _emit({"ready": True}),
        prime_gocb_ref=args.prime_gocb_ref,
        on_primed=lambda: _emit({"primed": True}),
    )
    for msg in messages:
        _emit(msg)
    return 0 if len(messages) == args.count else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m goosectl.lab.iec61850_peer")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="publish data sets with libiec61850")
    pub.add_argument("--iface", required=True)
    pub.add_argument("--appid", type=_int, required=True)
    pub.add_argument("--dst", type=_mac, default=_mac("01:0c:cd:01:00:01"))
    pub.add_argument("--vlan-id", type=_int, default=0)
    pub.add_argument("--vlan-prio", type=_int, default=4)
    pub.add_argument("--no-vlan", action="store_true")
    pub.add_argument("--gocb-ref", required=True)
    pub.add_argument("--dataset", required=True)
    pub.add_argument("--go-id", required=True)
    pub.add_argument("--conf-rev", type=_int, default=1)
    pub.add_argument("--tal", type=_int, default=2000, help="timeAllowedToLive in ms")
    pub.add_argument("--simulation", "--test", action="store_true")
    pub.add_argument("--nds-com", action="store_true")
    pub.add_argument("--st-num", type=_int)
    pub.add_argument("--sq-num", type=_int)
    pub.add_argument("--repeat", type=_int, default=1)
    pub.add_argument("--interval-ms", type=float, default=0.0)
    pub.add_argument("--values", required=True, help="JSON list of data sets")
    pub.set_defaults(func=_cmd_publish)
    rec = sub.add_parser("receive", help="receive GOOSE with libiec61850 and print JSON")
    rec.add_argument("--iface", required=True)
    rec.add_argument("--count", type=_int, required=True)
    rec.add_argument("--timeout", type=float, default=10.0)
    rec.add_argument("--gocb-ref")
    rec.add_argument(
        "--prime-gocb-ref", help="print {'primed': true} on the first such frame, skip them"
    )
    rec.add_argument("--json", action="store_true", help="JSON lines (the only format)")
    rec.set_defaults(func=_cmd_receive)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except PeerError as exc:
        print(f"iec61850_peer: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
