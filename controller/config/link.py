"""The device link's timing and limits, validated like every other config.

`DeviceLimits` are the limits a user sets in a bay config's `device:` section (the bay's
`DeviceCfg` is them plus the port and the simulator's mechanism); `LinkConfig` is what the
link's machines run with (`controller.link.core.LinkCore`): those limits plus the timing a
config does not expose and the first sequence number. Defaults are the SPEC 6.5
recommendations (protocols/serial/SPEC.md).

A bad value is a pydantic `ValidationError` (a `ValueError`) naming the field and the
reason, whether it comes from a file or from code.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from goosectl.controller.config.base import Cfg
from goosectl.protocols.serial import messages as m


def check_config_param(param: int, value: int) -> m.ConfigParam:
    """A device parameter (CONFIGURE) and its value, checked against the message schema's
    ranges; also used for CONFIGURE commands sent at run time."""
    try:
        p = m.ConfigParam(param)
    except ValueError:
        known = ", ".join(f"{int(x)} {x.name}" for x in m.ConfigParam)
        raise ValueError(f"unknown CONFIGURE parameter {param!r}; known: {known}") from None
    r = m.CONFIG_PARAMS[p]
    if not isinstance(value, int) or not r.minimum <= value <= r.maximum:
        raise ValueError(f"{p.name}={value!r} is outside {r.minimum}..{r.maximum} {r.unit}")
    return p


class DeviceLimits(Cfg):
    """How long to wait for the device, how often to retry, and when it misbehaves."""

    response_timeout_ms: float = Field(default=50, gt=0)
    max_retries: int = Field(default=3, ge=0)
    chatter_max: int = Field(
        default=10,
        ge=1,
        description="position changes per chatter_window_ms before an alarm (the logic "
        "then hears only the settled position: a bouncing contact floods nothing)",
    )
    chatter_window_ms: float = Field(default=1000, gt=0)
    reboot_max: int = Field(
        default=3, ge=1, description="device restarts per reboot_window_ms before an alarm"
    )
    reboot_window_ms: float = Field(default=60_000, gt=0)
    reboot_quiet_ms: float = Field(
        default=5000,
        gt=0,
        description="in a reboot loop, how long the device must stay up before one resync",
    )


class LinkConfig(DeviceLimits):
    """The link's machines' settings: the device limits plus timing and the first seq."""

    reconnect_ms: float = Field(default=500, gt=0)
    reconnect_max_ms: float = Field(
        default=8000,
        gt=0,
        description="a port that cannot be opened is retried after reconnect_ms, doubling "
        "up to this",
    )
    resync_retry_ms: float = Field(default=400, gt=0)
    idle_ms: float = Field(default=1000, gt=0)
    first_seq: int = Field(default=1, ge=0, le=0xFFFF)
    device_config: dict[int, int] = Field(
        default_factory=dict, description="CONFIGURE parameter -> value, set after every resync"
    )

    @field_validator("device_config")
    @classmethod
    def _params(cls, v: dict[int, int]) -> dict[int, int]:
        for param, value in v.items():
            check_config_param(param, value)
        return v
