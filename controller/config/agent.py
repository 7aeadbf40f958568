"""The agent's sessions as configured: how long a confirmation may wait, how many are open.

Limits like the control socket's (`controller.config.control`): a session waiting for a
confirmation expires, and the count of open and remembered sessions is bounded, so a
client opening sessions in a loop cannot grow the controller without end.
"""

from __future__ import annotations

from pydantic import Field

from goosectl.controller.config.base import Cfg


class AgentCfg(Cfg):
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
    resume_max_age_s: float = Field(
        default=30,
        gt=0,
        description="after a restart, a session's first device command is refused "
        "(controller_restarted) if its step began longer ago than this",
    )
