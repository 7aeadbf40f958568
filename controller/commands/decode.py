"""`goosectl decode FILE`: print every GOOSE frame of a pcap/pcapng, as a table or JSON.

One line per GOOSE frame. Non-GOOSE frames are skipped silently; a malformed GOOSE frame
prints an error line (frame number, offset, field, reason) and decoding continues, so
one bad frame never hides the rest of a capture. Exit 0 when the file was read to the
end, 2 when it could not be read (the frames before the defect are still printed).

R-GOOSE (UDP port 102) is read too: one line per goosePdu an SPDU carries, with the SPDU's
addresses, number and key id (`rgoose`), and with --keys its verdict (`auth`); a malformed
SPDU, or an encrypted one no key decrypts, is an error line like a malformed frame.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from goosectl.controller.cli import CommandError
from goosectl.controller.commands._auth_args import add_keys_args, keys_for
from goosectl.controller.commands._rgoose import Unit, units
from goosectl.controller.display import printable
from goosectl.controller.goose.auth import judge
from goosectl.protocols.ethernet.pcap import LINKTYPE_ETHERNET, CaptureError, read_capture
from goosectl.protocols.goose import GooseError, decode_all_data, is_goose, parse_header
from goosectl.protocols.goose.frame import decode_frame
from goosectl.protocols.goose.jsonform import frame_to_json
from goosectl.protocols.goose.security import DEFAULT_PROFILE, PROFILES
from goosectl.protocols.goose.utctime import (
    ACCURACY_MASK,
    ACCURACY_UNSPECIFIED,
    CLOCK_FAILURE,
    CLOCK_NOT_SYNCHRONIZED,
    LEAP_SECONDS_KNOWN,
)

log = logging.getLogger(__package__)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "decode",
        help="print the GOOSE frames of a pcap/pcapng file",
        description="Decode every GOOSE frame of a pcap or pcapng file (format detected by "
        "magic number). Default output is a table like tshark's; --json prints one object "
        "per frame.",
    )
    p.add_argument("file", help="pcap or pcapng file")
    p.add_argument("--json", action="store_true", help="one JSON object per frame")
    p.add_argument("--appid", type=_appid, help="only this APPID (decimal or 0x hex)")
    p.add_argument("--gocbref", help="only this gocbRef")
    add_keys_args(p)
    p.set_defaults(func=run)


def _appid(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"APPID {text!r} is not a number") from None
    if not 0 <= value <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"APPID {text!r} is outside 0..0xffff")
    return value


def _raw_appid(data: bytes) -> int | None:
    """APPID straight from the bytes, so filters apply even to frames that fail to parse."""
    off = 18 if data[12:14] == b"\x81\x00" else 14
    if len(data) < off + 2:
        return None
    return int.from_bytes(data[off : off + 2], "big")


def _data_text(item: dict[str, Any]) -> str:
    value = item["value"]
    if item["type"] in ("structure", "array"):
        return "{" + ", ".join(_data_text(v) for v in value) + "}"
    if item["type"] == "utc-time":
        return value["iso"]
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return str(value)


def time_quality_text(q: int) -> str:
    """``0x9f(leap-seconds-known,accuracy-unspecified)``: the octet and what it says, so a
    clock that failed or is not synchronised shows on the frame's line (IEC 61850-8-1)."""
    parts = [
        name
        for bit, name in (
            (LEAP_SECONDS_KNOWN, "leap-seconds-known"),
            (CLOCK_FAILURE, "clock-failure"),
            (CLOCK_NOT_SYNCHRONIZED, "not-synchronized"),
        )
        if q & bit
    ]
    accuracy = q & ACCURACY_MASK
    parts.append("accuracy-unspecified" if accuracy == ACCURACY_UNSPECIFIED else f"{accuracy}-bit")
    return f"0x{q:02x}({','.join(parts)})"


def _table_line(obj: dict[str, Any], t0: float) -> str:
    vlan = obj["vlan"]
    tag = f" vlan={vlan['id']}/{vlan['priority']}" if vlan else ""
    sim = " S" if obj["simulated"] else ""
    data = ", ".join(_data_text(v) for v in obj["allData"])
    odd = obj.get("nonCanonical")
    note = f" non-canonical={','.join(odd)}" if odd else ""
    # the frame's own strings (an mMSString may hold a line feed or ESC) are escaped:
    # one frame is one line, whatever its sender wrote
    return printable(
        f"{obj['frame']:>6} {obj['time'] - t0:12.6f} {obj['src']} -> {obj['dst']}{tag} "
        f"GOOSE appid=0x{obj['appid']:04x}{sim} gocbRef={obj['gocbRef']} "
        f"datSet={obj['datSet']} goID={obj['goID']} "
        f"stNum={obj['stNum']} sqNum={obj['sqNum']} TAL={obj['timeAllowedtoLive']} "
        f"confRev={obj['confRev']} t={obj['t']['iso']} "
        f"tq={time_quality_text(obj['t']['quality'])} data=[{data}]{note}{_auth_text(obj)}"
    )


def _auth_text(obj: dict[str, Any]) -> str:
    auth = obj.get("auth")
    if auth is None:
        return ""
    if auth["status"] == "verified":
        return f" auth=verified(key {auth['key_id']}, {auth['algorithm']})"
    return f" auth={auth.get('reason', auth['status'])}"


def _error_obj(number: int, time: float, exc: GooseError) -> dict[str, Any]:
    return {
        "frame": number,
        "time": time,
        "error": str(exc),
        "kind": exc.kind,
        "offset": exc.offset,
        "path": exc.path,
    }


def _rgoose_text(obj: dict[str, Any]) -> str:
    r = obj.get("rgoose")
    if r is None:
        return ""
    return f" rgoose={r['src']}->{r['dst']} spdu={r['spdu_number']} key={r['key_id']}"


def _show_error(
    out: Any, as_json: bool, number: int, time: float, t0: float, exc: GooseError
) -> None:
    if as_json:
        out.write(json.dumps(_error_obj(number, time, exc)) + "\n")
    else:
        out.write(printable(f"{number:>6} {time - t0:12.6f} error: {exc}") + "\n")


def run(args: argparse.Namespace) -> int:
    """Every GOOSE frame of the capture (R-GOOSE's expanded) shown, filtered by --appid and
    --gocbref; a filter that matched nothing is said, with the APPIDs that were seen."""
    decode = _Decode(args, sys.stdout)
    try:
        for cap in units(read_capture(args.file), decode.keys):  # R-GOOSE expanded (UDP 102)
            decode.unit(cap)
    except CaptureError as exc:
        decode.out.flush()
        raise CommandError(f"cannot read capture: {exc}") from None
    # (`goosectl decode big.pcap | head`: a reader that left ends the run quietly, in cli.py)
    log.debug(
        "%s: %d GOOSE frame(s) shown, %d other frame(s) skipped",
        args.file,
        decode.shown,
        decode.skipped,
    )
    decode.warn_unmatched()
    return 0


class _Decode:
    """One pass over a capture: each unit shown (or skipped), counted, its APPID noted."""

    def __init__(self, args: argparse.Namespace, out: Any) -> None:
        self.args = args
        self.out = out
        self.t0: float | None = None
        self.shown = 0
        self.skipped = 0
        self.appids: set[int] = set()
        self.debug = log.isEnabledFor(logging.DEBUG)  # asked once, not per frame
        # IEC 62351-6: with --keys, each frame's verdict at its capture time (UTC)
        self.keys = keys_for(args, None) if args.keys else None
        self.profile = PROFILES[args.auth_profile or DEFAULT_PROFILE]

    def unit(self, cap: Unit) -> None:
        if cap.error is not None:  # an SPDU that cannot be read
            self.t0 = cap.ts_ns / 1e9 if self.t0 is None else self.t0
            _show_error(self.out, self.args.json, cap.number, cap.ts_ns / 1e9, self.t0, cap.error)
            self.shown += 1
            return
        if cap.linktype != LINKTYPE_ETHERNET or not is_goose(cap.data):
            self.skipped += 1
            if self.debug:
                log.debug("frame %d: not GOOSE (linktype %d)", cap.number, cap.linktype)
            return
        time = cap.ts_ns / 1e9
        if self.t0 is None:
            self.t0 = time
        appid = _raw_appid(cap.data)
        if appid is not None:
            self.appids.add(appid)
        if self.args.appid is not None and appid != self.args.appid:
            return
        self._frame(cap, time, self.t0)

    def _frame(self, cap: Unit, time: float, t0: float) -> None:
        """A GOOSE frame of the wanted APPID: decoded and shown, or its error shown."""
        try:
            if self.args.gocbref is not None:
                head = parse_header(cap.data)
                if head.gocb_ref != self.args.gocbref:
                    return
                decode_all_data(cap.data, head.all_data_offset)  # fail early, same errors
            frame = decode_frame(cap.data)
        except GooseError as exc:
            self.shown += 1
            _show_error(self.out, self.args.json, cap.number, time, t0, exc)
            return
        self.shown += 1
        obj = frame_to_json(frame, number=cap.number, time=time)
        if cap.rgoose is not None:
            obj["rgoose"] = cap.rgoose
        if self.keys is not None:
            verdict = cap.verdict or judge(cap.data, self.keys, self.profile, cap.ts_ns)[0]
            obj["auth"] = verdict.as_json()
        line = json.dumps(obj) if self.args.json else _table_line(obj, t0) + _rgoose_text(obj)
        self.out.write(line + "\n")

    def warn_unmatched(self) -> None:
        """A filter that matched no frame of a capture that had some: said, with the
        APPIDs seen, so a mistyped filter is not read as an empty capture."""
        args = self.args
        if self.shown or not self.appids or (args.appid is None and args.gocbref is None):
            return
        wanted = [f"--appid 0x{args.appid:04x}"] if args.appid is not None else []
        wanted += [f"--gocbref {args.gocbref}"] if args.gocbref is not None else []
        seen = ", ".join(f"0x{a:04x}" for a in sorted(self.appids))
        log.warning("no frame matched %s (APPIDs seen: %s)", " and ".join(wanted), seen)
