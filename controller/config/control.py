"""The control socket of a running controller: where it is, who may use it, its limits.

Every number here is a limit that keeps one client (or a thousand) from stopping the
controller: a line too long or too deep is refused, a client that does not read its
replies is dropped, idle clients time out, and requests are served a few per loop round so
GOOSE frames and trips go first (the agent's sessions: `controller.config.agent`). Crossing
any of them is counted, raises an alarm and is journaled (`controller.shell.control_log`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from goosectl.controller.config.base import Cfg


class ControlCfg(Cfg):
    socket: Path | None = Field(
        default=None,
        description="control socket (default: $XDG_RUNTIME_DIR/goosectl/control.sock, "
        "/run/goosectl/control.sock for root, else /tmp/goosectl-UID/control.sock)",
    )
    group: str | None = Field(
        default=None,
        description="a group whose members may use the socket too (mode 0660); "
        "default: only the controller's own user and root",
    )
    supervisor_group: str | None = Field(
        default=None,
        description="a group whose members may confirm any session; default: a session "
        "is confirmed only by the uid that started it",
    )
    max_clients: int = Field(default=64, ge=1, description="connections open at once")
    idle_timeout_s: float = Field(default=120, gt=0, description="a silent client is closed")
    max_line_bytes: int = Field(default=16384, ge=256, description="one request line")
    max_depth: int = Field(default=16, ge=2, description="JSON nesting of one request")
    max_output_bytes: int = Field(
        default=1 << 20, ge=4096, description="replies queued for one client"
    )
    write_timeout_s: float = Field(
        default=5, gt=0, description="a client that takes no reply bytes this long is dropped"
    )
    requests_per_round: int = Field(
        default=4, ge=1, description="requests served between two looks at the network"
    )
    round_budget_ms: float = Field(
        default=0.5, gt=0, description="time for requests per loop round (at least one)"
    )
    alarm_quiet_s: float = Field(
        default=10, gt=0, description="a limit's alarm clears this long after its last crossing"
    )
