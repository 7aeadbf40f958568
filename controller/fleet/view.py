"""The fleet table, one row per bay, from the central store: what `goosectl fleet status`
prints and the web page's fleet view can reuse.

A bay is `dead` when its death (the Will, or a clean stop) carries the bdSeq of its last
birth; `stale` when its last state is older than `stale_s` (the uplink sends one at least
every 10 s); `online` otherwise. Lag: journal rows the bay had (its last state's seq) that
the store does not yet cover."""

from __future__ import annotations

import json
from typing import Any

from goosectl.controller.fleet.store import Store

#: no `state` for this long (the uplink sends one at least every 10 s): stale
STALE_S = 25.0


def liveness(
    bd_seq: int | None,
    death_bd_seq: int | None,
    birth_ns: int | None,
    state_ns: int | None,
    now_ns: int,
    stale_s: float = STALE_S,
) -> str:
    """`dead`, `stale` or `online`: the one rule, for `fleet status` and the fleet page."""
    if death_bd_seq is not None and bd_seq is not None and death_bd_seq >= bd_seq:
        return "dead"
    fresh = state_ns is not None and now_ns - state_ns <= stale_s * 1e9
    return "online" if fresh and birth_ns else "stale"


def fleet_rows(store: Store, now_ns: int, stale_s: float = STALE_S) -> list[dict[str, Any]]:
    gaps: dict[str, list[list[int]]] = {}
    for g in store.gaps():
        gaps.setdefault(g.controller, []).append([g.seq_first, g.seq_last, int(g.lost)])
    out = []
    for b in store.bays():
        state = json.loads(b["state"]) if b["state"] else {}
        status = state.get("status") or {}
        live = liveness(
            b["bd_seq"], b["death_bd_seq"], b["birth_ns"], b["state_ns"], now_ns, stale_s
        )
        lgos = status.get("lgos") or []
        valid = sum(1 for v in lgos if v.get("St") is True)
        alarms = alarm_names(status)
        seen = state.get("journal_seq") or 0
        out.append(
            {
                "controller": b["controller"],
                "site": b["site"],
                "bay": b["bay"],
                "liveness": live,
                "stale": live != "online",
                "bdSeq": b["bd_seq"],
                "version": b["version"],
                "breaker": status.get("breaker"),
                "mode": status.get("mode"),
                "reachable": state.get("reachable"),
                "alarms": len(alarms),
                "alarm_names": alarms,
                "lgos": f"{valid}/{len(lgos)} valid",
                "first_seq": b["first_seq"],
                "last_seq": b["last_seq"],
                "lag": max(0, seen - b["last_seq"]),
                "gaps": gaps.get(b["controller"], []),
                "refused": b["refused"],
                "state_utc_ns": b["state_ns"],
            }
        )
    return out


def alarm_names(status: dict[str, Any]) -> list[str]:
    """What in a bay's status is an alarm: the device link not up, a subscription whose
    LGOS says it is not valid, and the status's own `alarms` when it has them."""
    out = []
    if status.get("link") not in (None, "up"):
        out.append(f"link {status['link']}")
    out += [f"lgos {v.get('stream')}" for v in status.get("lgos") or [] if v.get("St") is False]
    out += sorted(status.get("alarms") or {})
    return out


def table(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as aligned text columns."""
    head = ("bay", "liveness", "breaker", "mode", "alarms", "lgos", "last seq", "lag", "gaps")
    body = [
        (
            r["controller"],
            r["liveness"],
            str(r["breaker"] or "-"),
            str(r["mode"] or "-"),
            str(r["alarms"]),
            r["lgos"],
            str(r["last_seq"]),
            str(r["lag"]),
            ",".join(f"{a}-{b}{' lost' if lost else ''}" for a, b, lost in r["gaps"]) or "-",
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    return [
        "  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip()
        for line in (head, *body)
    ]
