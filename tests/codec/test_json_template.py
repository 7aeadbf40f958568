"""JSON form of Data (configs, `--values`) and the publisher's FrameTemplate."""

from __future__ import annotations

import json
import math

import pytest

from goosectl.protocols.goose import (
    BadValue,
    Boolean,
    FloatingPoint,
    FrameTemplate,
    GooseFrame,
    Real,
    TypeMismatch,
    UtcTime,
    Vlan,
    all_data_from_json,
    all_data_to_json,
    decode_frame,
    encode_frame,
    frame_to_json,
    from_json,
    to_json,
)
from tests.codec.corpus import every_choice, flat16


def test_every_choice_survives_json() -> None:
    values = every_choice()
    text = json.dumps(all_data_to_json(values))
    back = all_data_from_json(json.loads(text))
    assert back == values


def test_json_shapes_follow_the_issue() -> None:
    assert to_json(Boolean(True)) == {"type": "boolean", "value": True}
    assert to_json(FloatingPoint.f32(1.5)) == {"type": "floating-point", "value": 1.5, "bits": 32}
    assert to_json(UtcTime(1, 0x800000, 0x0A)) == {
        "type": "utc-time",
        "value": {"iso": "1970-01-01T00:00:01.500000000Z", "seconds": 1, "fraction": 0x800000,
                  "quality": 10},
    }  # fmt: skip
    assert to_json(Real(math.nan))["value"] == "NaN"
    assert json.dumps(to_json(Real(-math.inf)))  # strict JSON, no bare Infinity


def test_from_json_errors_name_the_element() -> None:
    with pytest.raises(TypeMismatch) as err:
        bad_member = {"type": "integer", "value": "7"}
        all_data_from_json(
            [{"type": "boolean", "value": True}, {"type": "structure", "value": [bad_member]}]
        )
    assert err.value.path == "allData[1].structure[0]"
    with pytest.raises(TypeMismatch, match="unknown Data type"):
        from_json({"type": "float", "value": 1})
    with pytest.raises(BadValue):
        from_json({"type": "floating-point", "value": 1.0, "bits": 16})
    with pytest.raises(BadValue):
        from_json({"type": "floating-point", "value": 1e300, "bits": 32})
    with pytest.raises(TypeMismatch):
        from_json({"type": "bit-string", "value": "012"})
    with pytest.raises(BadValue):
        from_json({"type": "utc-time", "value": {"seconds": 2**33}})
    with pytest.raises(TypeMismatch):
        from_json([1, 2])


def test_utc_time_from_iso() -> None:
    t = from_json({"type": "utc-time", "value": {"iso": "2023-11-14T22:13:20.5Z", "quality": 10}})
    assert t == UtcTime(1_700_000_000, 0x800000, 10)


def test_frame_to_json_keys() -> None:
    frame = GooseFrame(gocb_ref="a/b", dat_set="a/c", all_data=flat16()[:2], vlan=Vlan(3, 5),
                       reserved1=0x8000)  # fmt: skip
    obj = frame_to_json(decode_frame(encode_frame(frame)), number=1, time=2.5)
    assert list(obj) == [
        "frame", "time", "src", "dst", "vlan", "appid", "simulated", "gocbRef",
        "timeAllowedtoLive", "datSet", "goID", "t", "stNum", "sqNum", "simulation", "confRev",
        "ndsCom", "numDatSetEntries", "allData",
    ]  # fmt: skip
    assert obj["vlan"] == {"id": 3, "priority": 5} and obj["simulated"] is True
    assert obj["allData"][1] == {"type": "bit-string", "value": "0" * 13}


def test_template_matches_encode_frame() -> None:
    config = GooseFrame(
        gocb_ref="IED1LD0/LLN0$GO$gcb01",
        dat_set="IED1LD0/LLN0$DS01",
        go_id="G",
        all_data=flat16(),
        vlan=Vlan(10, 4),
        appid=0x1001,
        conf_rev=7,
        nds_com=True,
        simulation=True,
        reserved1=0x8000,
    )
    template = FrameTemplate(config)
    values = flat16()
    ad = FrameTemplate.encode_values(values)
    for st, sq, tal in ((1, 0, 10), (2**31, 127, 128), (2**32 - 1, 2**32 - 1, 40000)):
        t = UtcTime(1_700_000_000 + sq % 7, 0x10, 0x0A)
        built = template.build(st, sq, tal, t, ad)
        expect = GooseFrame(**{
            **{n: getattr(config, n) for n in config.__dataclass_fields__},
            "st_num": st, "sq_num": sq, "time_allowed_to_live": tal, "t": t,
        })  # fmt: skip
        assert built == encode_frame(expect)
        assert decode_frame(built).all_data == values
    big = tuple(Boolean(i % 2 == 0) for i in range(100))
    built = FrameTemplate(GooseFrame(gocb_ref="a", dat_set="b", all_data=big)).build(
        1, 1, 1, UtcTime(0), FrameTemplate.encode_values(big)
    )
    assert decode_frame(built).all_data == big
    with pytest.raises(BadValue):
        template.build(-1, 0, 1, UtcTime(0), ad)
    with pytest.raises(TypeMismatch):
        template.build(1, 0, 1, 5, ad)  # type: ignore[arg-type]
