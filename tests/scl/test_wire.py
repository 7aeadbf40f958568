"""The wire check on frames our publisher makes, with expectations written in the test."""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.scl.wire import Expected, WireCheck
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.mac import parse_mac
from goosectl.protocols.goose import Boolean

MS = 1_000_000
T0 = 1_800_000_000 * 1_000_000_000
GOCB = "P1LD0/LLN0$GO$g"
DST = "01:0c:cd:01:00:10"


def frames(seconds: float = 3.0, change_at: float | None = 1.5, **pub) -> list[tuple[int, bytes]]:
    """(time, frame) of one publisher: start, one state change, heartbeats."""
    cfg = {
        "gocb_ref": GOCB,
        "dat_set": "P1LD0/LLN0$ds",
        "go_id": "gid",
        "conf_rev": 3,
        "appid": 0x10,
        "dst": DST,
        "members": ["boolean"],
        "initial": [{"type": "boolean", "value": False}],
        "min_time_ms": 4,
        "max_time_ms": 1000,
    } | pub
    hub = GooseHub(GooseConfig.model_validate({"publishers": [cfg]}))
    out = [(T0, e.data) for e in hub.start(T0, T0) if type(e) is SendFrame]
    end = T0 + int(seconds * 1e9)
    changed = change_at is None
    while (d := hub.next_deadline()) is not None and d <= end:
        if not changed and d >= T0 + int(change_at * 1e9):
            t = T0 + int(change_at * 1e9)
            out += [
                (t, e.data)
                for e in hub.publish(GOCB, (Boolean(True),), t, t)
                if type(e) is SendFrame
            ]
            changed = True
            continue
        out += [(d, e.data) for e in hub.advance(d) if type(e) is SendFrame]
    return out


def expected(**kw) -> Expected:
    base = dict(
        gocb_ref=GOCB,
        appid=0x10,
        dst=parse_mac(DST),
        conf_rev=3,
        dat_set="P1LD0/LLN0$ds",
        go_id="gid",
        members=("boolean",),
        min_time_ms=4,
        max_time_ms=1000,
    )
    return Expected(**(base | kw))


def run(exp: list[Expected], fs) -> list:
    check = WireCheck(exp)
    for t, f in fs:
        check.frame(t, f)
    return check.verdicts()


def test_a_stream_as_expected_is_matched():
    [v] = run([expected()], frames())
    assert (v.status, v.differences, v.frames > 5) == ("matched", (), True)


def test_retransmission_intervals_against_min_and_max_time():
    # the publisher repeats a change after 10 ms and beats every 1000 ms; the SCL says
    # 4 ms and 500 ms: both too slow (slack 10 % + 2 ms)
    [v] = run([expected(max_time_ms=500)], frames(5.0, 2.5, min_time_ms=10))
    got = {d.field: (d.expected, d.seen) for d in v.differences}
    assert got == {"minTime": (4, [10.0]), "maxTime": (500, [1000.0])}
    assert v.status == "mismatched"
    text = [d.text() for d in v.differences]
    assert "minTime 10 ms (expected 4 ms)" in text and "maxTime 1000 ms (expected 500 ms)" in text


def test_header_fields_each_named():
    fs = frames(go_id="other", dat_set="P1LD0/LLN0$ds2", conf_rev=4)
    [v] = run([expected()], fs)
    assert {d.field for d in v.differences} == {"goID", "datSet", "confRev"}


def test_a_and_b_copies_on_two_vlans_are_one_stream_and_not_intervals():
    a = frames(vlan={"id": 10, "priority": 6})
    b = frames(vlan={"id": 11, "priority": 6})
    both = sorted(a + b, key=lambda x: x[0])
    [v] = run([expected(vlan_ids=frozenset({10, 11}), vlan_priority=6)], both)
    assert v.status == "matched", v.differences  # no 0 ms "first repetition" from copies
    [v] = run([expected(vlan_ids=frozenset({10}), vlan_priority=4)], both)
    got = {d.field: (d.expected, d.seen) for d in v.differences}
    assert got == {"vlanId": (10, [10, 11]), "vlanPriority": (4, [6])}


def test_vlan_zero_is_a_priority_tag_and_untagged_frames_carry_it():
    [v] = run([expected(vlan_ids=frozenset({0}))], frames())
    assert v.status == "matched"


def test_unexpected_missing_and_the_ones_without_an_address():
    exp = [
        expected(gocb_ref="P2LD0/LLN0$GO$g"),
        expected(gocb_ref="P3LD0/LLN0$GO$g", on_wire=False),  # no GSE address: no finding
    ]
    got = {(v.status, v.gocb_ref) for v in run(exp, frames())}
    assert got == {("unexpected", GOCB), ("missing", "P2LD0/LLN0$GO$g")}


def test_a_wrong_member_type_names_the_member():
    [v] = run([expected(members=("bit-string/13",))], frames())
    [d] = v.differences
    assert d.field == "memberTypes" and d.seen == [("boolean",)]
    assert d.text() == "member types: member 0 is boolean, not bit-string/13"
