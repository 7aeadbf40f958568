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
from goosectl.controller.commands._rgoose import units
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
    out = sys.stdout
    t0: float | None = None
    shown = 0
    appids: set[int] = set()
    skipped = 0
    debug = log.isEnabledFor(logging.DEBUG)  # asked once, not per frame
    # IEC 62351-6: with --keys, each frame's verdict at its capture time (UTC)
    keys = keys_for(args, None) if args.keys else None
    profile = PROFILES[args.auth_profile or DEFAULT_PROFILE]
    try:
        for cap in units(read_capture(args.file), keys):  # R-GOOSE expanded (UDP 102)
            if cap.error is not None:  # an SPDU that cannot be read
                t0 = cap.ts_ns / 1e9 if t0 is None else t0
                _show_error(out, args.json, cap.number, cap.ts_ns / 1e9, t0, cap.error)
                shown += 1
                continue
            if cap.linktype != LINKTYPE_ETHERNET or not is_goose(cap.data):
                skipped += 1
                if debug:
                    log.debug("frame %d: not GOOSE (linktype %d)", cap.number, cap.linktype)
                continue
            time = cap.ts_ns / 1e9
            if t0 is None:
                t0 = time
            appid = _raw_appid(cap.data)
            if appid is not None:
                appids.add(appid)
            if args.appid is not None and appid != args.appid:
                continue
            try:
                if args.gocbref is not None:
                    head = parse_header(cap.data)
                    if head.gocb_ref != args.gocbref:
                        continue
                    decode_all_data(cap.data, head.all_data_offset)  # fail early, same errors
                frame = decode_frame(cap.data)
            except GooseError as exc:
                shown += 1
                err = _error_obj(cap.number, time, exc)
                if args.json:
                    out.write(json.dumps(err) + "\n")
                else:
                    out.write(printable(f"{cap.number:>6} {time - t0:12.6f} error: {exc}") + "\n")
                continue
            shown += 1
            obj = frame_to_json(frame, number=cap.number, time=time)
            if cap.rgoose is not None:
                obj["rgoose"] = cap.rgoose
            if keys is not None:
                verdict = cap.verdict or judge(cap.data, keys, profile, cap.ts_ns)[0]
                obj["auth"] = verdict.as_json()
            line = json.dumps(obj) if args.json else _table_line(obj, t0) + _rgoose_text(obj)
            out.write(line + "\n")
    except CaptureError as exc:
        out.flush()
        raise CommandError(f"cannot read capture: {exc}") from None
    # (`goosectl decode big.pcap | head`: a reader that left ends the run quietly, in cli.py)
    log.debug("%s: %d GOOSE frame(s) shown, %d other frame(s) skipped", args.file, shown, skipped)
    if not shown and appids and (args.appid is not None or args.gocbref is not None):
        wanted = [f"--appid 0x{args.appid:04x}"] if args.appid is not None else []
        wanted += [f"--gocbref {args.gocbref}"] if args.gocbref is not None else []
        seen = ", ".join(f"0x{a:04x}" for a in sorted(appids))
        log.warning("no frame matched %s (APPIDs seen: %s)", " and ".join(wanted), seen)
    return 0
