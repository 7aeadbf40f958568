"""The topic layout and the payloads, built and read in one place by the uplink and the
collector, so the two cannot disagree (docs/fleet.md; a JSON Schema per payload in
docs/fleet/, which the tests check every payload against).

    goosectl/v1/{site}/{bay}/birth          retained, QoS 1: bdSeq, version, journal seq
    goosectl/v1/{site}/{bay}/death          retained, QoS 1, the MQTT Will: the same bdSeq
    goosectl/v1/{site}/{bay}/state          retained, QoS 1: `goosectl status --json`
    goosectl/v1/{site}/{bay}/journal        QoS 1: a batch of journal rows in seq order
    goosectl/v1/{site}/{bay}/cmd/req        to the bay: a remote procedure request
    goosectl/v1/{site}/{bay}/cmd/resp/{corr} from the bay: its answer

Every payload is a JSON object with `schema` (this layout's version): a reader refuses
another version rather than guess.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

ROOT = "goosectl/v1"
SCHEMA = 1
KINDS = ("birth", "death", "state", "journal")
#: the journal row's fields as published, in the journal's own order
ROW_FIELDS = (
    "seq",
    "utc_ns",
    "machine",
    "event",
    "source",
    "target",
    "effects",
    "table",
    "version",
)
_TOPIC = re.compile(
    r"^goosectl/v1/([A-Za-z0-9_-]{1,64})/([A-Za-z0-9_-]{1,64})/"
    r"(birth|death|state|journal|cmd/req|cmd/resp/[A-Za-z0-9_-]{1,64})$"
)


class PayloadError(ValueError):
    """A payload that is not what its topic promises: the reason, for the refusal."""


@dataclass(frozen=True, slots=True)
class Topic:
    """A parsed topic: whose it is and what it carries (`kind`: birth, death, state,
    journal, cmd/req, or cmd/resp with `corr`)."""

    site: str
    bay: str
    kind: str
    corr: str | None = None

    @property
    def controller(self) -> str:
        return f"{self.site}/{self.bay}"


def topic(site: str, bay: str, kind: str) -> str:
    return f"{ROOT}/{site}/{bay}/{kind}"


def parse_topic(name: str) -> Topic | None:
    """The topic's parts, or None for a topic outside the layout (counted and refused)."""
    m = _TOPIC.match(name)
    if m is None:
        return None
    kind = m.group(3)
    if kind.startswith("cmd/resp/"):
        return Topic(m.group(1), m.group(2), "cmd/resp", kind.removeprefix("cmd/resp/"))
    return Topic(m.group(1), m.group(2), kind)


def utc_now(ns: int) -> str:
    """ISO 8601 with a Z, what a person reads beside the nanoseconds."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat().replace("+00:00", "Z")


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=str).encode()


def decode(payload: bytes, max_bytes: int = 8 * 1024 * 1024) -> dict[str, Any]:
    """A payload as a dict of this layout's schema version, or PayloadError with why."""
    if len(payload) > max_bytes:
        raise PayloadError(f"payload of {len(payload)} bytes is over {max_bytes}")
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise PayloadError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise PayloadError("a payload is a JSON object")
    if obj.get("schema") != SCHEMA:
        raise PayloadError(f"schema {obj.get('schema')!r} is not {SCHEMA}")
    return obj


def birth(site: str, bay: str, bd_seq: int, version: str, seq: int, now_ns: int) -> bytes:
    return encode(
        {
            "schema": SCHEMA,
            "controller": f"{site}/{bay}",
            "site": site,
            "bay": bay,
            "bdSeq": bd_seq,
            "version": version,
            "journal_seq": seq,
            "utc_ns": now_ns,
            "utc": utc_now(now_ns),
        }
    )


def death(site: str, bay: str, bd_seq: int) -> bytes:
    """The Will: written at connect, so it carries no time (the broker sends it later)."""
    return encode(
        {"schema": SCHEMA, "controller": f"{site}/{bay}", "site": site, "bay": bay, "bdSeq": bd_seq}
    )


def state(
    site: str, bay: str, bd_seq: int, status: dict[str, Any] | None, seq: int, now_ns: int
) -> bytes:
    """`status`: the controller's `goosectl status --json` reply without its `ok`, or None
    when its control socket does not answer (then `reason` says so)."""
    body: dict[str, Any] = {
        "schema": SCHEMA,
        "controller": f"{site}/{bay}",
        "site": site,
        "bay": bay,
        "bdSeq": bd_seq,
        "journal_seq": seq,
        "utc_ns": now_ns,
        "utc": utc_now(now_ns),
        "reachable": status is not None,
        "status": status,
    }
    return encode(body)


def journal_batch(
    site: str,
    bay: str,
    seq_first: int,
    seq_last: int,
    rows: list[dict[str, Any]],
    now_ns: int,
    lost: tuple[int, int] | None = None,
) -> bytes:
    """Rows `seq_first..seq_last` (the range is what is covered: seq numbers the journal
    never had, or that its writer dropped and announced, are simply not among the rows).
    `lost`: a range the journal deleted before it was sent (retention), said, never silent."""
    body: dict[str, Any] = {
        "schema": SCHEMA,
        "controller": f"{site}/{bay}",
        "site": site,
        "bay": bay,
        "seq_first": seq_first,
        "seq_last": seq_last,
        "sent_ns": now_ns,
        "rows": rows,
    }
    if lost is not None:
        body["lost"] = list(lost)
    return encode(body)


def check_batch(obj: dict[str, Any]) -> tuple[int, int, list[dict[str, Any]]]:
    """(seq_first, seq_last, rows) of a journal batch, its rows inside its range and in
    order, or PayloadError."""
    try:
        first, last, rows = int(obj["seq_first"]), int(obj["seq_last"]), obj["rows"]
    except (KeyError, TypeError, ValueError) as exc:
        raise PayloadError(f"a journal batch needs seq_first, seq_last, rows: {exc}") from exc
    if first < 1 or last < first - 1 or not isinstance(rows, list):
        raise PayloadError(f"bad range {first}..{last}")
    prev = first - 1
    for r in rows:
        if not isinstance(r, dict) or not isinstance(r.get("seq"), int):
            raise PayloadError("a row is an object with an integer seq")
        if not prev < r["seq"] <= last:
            raise PayloadError(f"row seq {r['seq']} out of order or outside {first}..{last}")
        prev = r["seq"]
    return first, last, rows
