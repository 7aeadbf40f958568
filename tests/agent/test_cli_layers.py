"""`goosectl agent status` and `list` show each session's layers and host lifecycle."""

from __future__ import annotations

import json

from tests.agent.test_cli import agent, serving_demo


def test_status_and_list_show_the_host_pause_and_abort(tmp_path):
    with serving_demo(tmp_path) as sock:
        # the demo's own session ended (its fallback reported the stuck breaker)
        first = json.loads(agent(sock, "status", "s1").stdout)["status"]
        assert first["host"] == "completed" and first["layers"]["phase"] == "ended", first
        assert json.loads(agent(sock, "run", "isolate", "bay=2").stdout)["session"] == "s2"
        st = json.loads(agent(sock, "status", "s2").stdout)
        assert st["status"]["host"] == "paused" and st["host"] == "paused", st
        assert st["status"]["layers"]["phase"] == "operating"
        assert st["status"]["layers"]["flow"] == "open_breaker"
        listed = json.loads(agent(sock, "list").stdout)["sessions"]
        assert {s["session"]: s["host"] for s in listed} == {"s1": "completed", "s2": "paused"}
        agent(sock, "abort", "s2")
        st = json.loads(agent(sock, "status", "s2").stdout)["status"]
        assert st["host"] == "completed" and st["layers"]["aborted"], st
        assert st["layers"]["flow"] == "stopped" and st["layers"]["phase"] == "ended"
