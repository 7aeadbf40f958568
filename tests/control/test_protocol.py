"""The control protocol's parser on its own: whatever a line holds, one reply, never an
exception; the nesting check agrees with the parser on what is too deep."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.controller.config.control import ControlCfg
from goosectl.controller.shell.control import ControlServer, too_deep
from tests.support.examples import examples


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ControlServer:
    path = Path(tmp_path_factory.mktemp("ctl")) / "ctl.sock"
    calls: list[dict] = []

    def handler(req: dict, now: int) -> dict:
        calls.append(req)
        if req["op"] == "boom":
            raise RuntimeError("a handler defect")
        return {"ok": True, "op": req["op"]}

    s = ControlServer(path, handler, cfg=ControlCfg(max_depth=16))
    s.calls = calls  # type: ignore[attr-defined]
    yield s
    s.close()


def nested(depth: int) -> bytes:
    return b'{"op": "x", "a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(
    ("line", "deep"),
    [
        (b'{"op": "list"}', False),
        (nested(16), False),
        (nested(17), True),
        (b"[" * 999, True),  # the input
        (b'{"op": "x", "s": "' + b"[" * 100 + b'"}', False),  # brackets in a string
        (b'{"op": "x", "s": "\\"' + b"[" * 100 + b'"}', False),  # after an escaped quote
        (b"[]" * 5000, False),  # many, but flat
        (b"]" * 50 + b"[" * 50, True),  # never pairs up
    ],
)
def test_nesting_is_measured_before_parsing(line, deep):
    assert too_deep(line, 16) is deep
    if not deep:  # malformed is fine (the parser says why); recursing too deep is not
        with contextlib.suppress(ValueError):
            json.loads(line)


def test_every_kind_of_bad_line_gets_its_own_reason(server):
    cases = {
        b"[" * 999: "bad request: JSON nested deeper than 16 levels (control.max_depth)",
        b"\xff\xfe": "bad request: not JSON: ",
        b"not json": "bad request: not JSON: Expecting value",
        b"[1, 2]": 'bad request: a request is a JSON object with an "op" string',
        b'{"op": 7}': 'bad request: a request is a JSON object with an "op" string',
        b'{"op": "boom"}': "RuntimeError: a handler defect",
    }
    for line, reason in cases.items():
        reply = server.answer(line)
        assert reply["ok"] is False and reply["error"].startswith(reason), (line, reply)
    assert server.answer(b'{"op": "list"}') == {"ok": True, "op": "list"}


@settings(max_examples=examples(500), deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids),
            max_leaves=40,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_any_line_gets_one_reply_and_never_an_exception(server, line):
    reply = server.answer(line)
    assert isinstance(reply, dict) and isinstance(reply["ok"], bool)
    json.dumps(reply)  # and it can be sent
