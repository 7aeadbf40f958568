"""The operator's side of a running controller: its control socket and the agent's sessions.

Every number here is a limit that keeps one client (or a thousand) from stopping the
controller: a line too long or too deep is refused, a client that does not read its
replies is dropped, idle clients time out, requests are served a few per loop round so
GOOSE frames and trips go first, and sessions waiting for a confirmation expire. Crossing
any of them is counted, raises an alarm and is journaled (`controller.shell.control_log`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ControlCfg(_Cfg):
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


class AgentCfg(_Cfg):
    confirm_timeout_s: float = Field(
        default=600, gt=0, description="a session waiting for confirmation is aborted after"
    )
    max_open_sessions: int = Field(
        default=64, ge=1, description="sessions not yet ended (running, queued or waiting)"
    )
    keep_finished_sessions: int = Field(
        default=256,
        ge=0,
        description="ended sessions kept in memory for status/list (history: the journal)",
    )
