"""The `uplink:` section of a controller config: where `goosectl uplink` sends this bay.

The uplink is a process of its own beside the controller (never inside its loop), so these
settings change nothing the controller does; they live in the controller's config because
they name the bay (site, bay) the controller is, and one file per bay is what operators
keep. Every field can be overridden on `goosectl uplink`'s command line. Credentials are
never written here, only the file that holds them, so a config can be shown or committed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from goosectl.controller.config.base import Cfg

#: A topic segment: no `/`, `.`, spaces or MQTT wildcards, since NATS maps `/` to `.` and
#: refuses some characters in subjects, and a wildcard in a bay's name would widen its ACL.
SEGMENT = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_segment(value: str, what: str) -> str:
    """`value` if it can be one topic segment, else a ValueError that says why."""
    if not SEGMENT.match(value):
        raise ValueError(
            f"{what} {value!r}: letters, digits, `_` and `-` only (1-64), it is a topic segment"
        )
    return value


class UplinkCfg(Cfg):
    broker: list[str] = Field(
        default_factory=lambda: ["mqtt://127.0.0.1:1883"],
        description="broker URLs, mqtt://HOST:PORT or mqtts://HOST:PORT; several are the "
        "nodes of one cluster, tried in turn when the connection is lost",
    )
    site: str = Field(default="site1", description="the site's topic segment")
    bay: str = Field(default="bay1", description="the bay's topic segment")
    credentials: Path | None = Field(
        default=None,
        description="a file with `username:password` on its first line (never the password "
        "itself in a config or on a command line)",
    )
    ca_file: Path | None = Field(
        default=None, description="CA certificates that verify an mqtts:// broker"
    )
    cert_file: Path | None = Field(default=None, description="client certificate (mqtts://)")
    key_file: Path | None = Field(default=None, description="its private key (mqtts://)")
    mqtt5: bool = Field(
        default=False,
        description="MQTT 5 instead of 3.1.1, for a broker that offers it (mosquitto): its "
        "reason codes tell a refused publish (0x87 for an ACL) from an accepted one; NATS "
        "speaks 3.1.1 only",
    )
    keepalive_s: int = Field(
        default=10,
        ge=1,
        le=3600,
        description="MQTT keepalive: the broker publishes the death 1.5x this after the "
        "uplink falls silent",
    )
    batch_rows: int = Field(default=500, ge=1, le=10_000, description="rows per journal batch")
    in_flight: int = Field(
        default=20, ge=1, le=1000, description="journal batches sent and not yet acknowledged"
    )
    poll_s: float = Field(
        default=0.1, gt=0, le=10, description="how often the journal is read for new rows"
    )
    state_every_s: float = Field(
        default=10, gt=0, le=600, description="a state snapshot at least this often"
    )
    max_cmd_bytes: int = Field(
        default=16384, ge=256, description="a cmd/req larger than this is refused unread"
    )
    priority: Literal["idle", "normal"] = Field(
        default="idle",
        description="the uplink's CPU scheduling: idle (SCHED_IDLE, nice 19 where refused), "
        "so the controller beside it wins every contention for a CPU; or normal",
    )

    @field_validator("site", "bay")
    @classmethod
    def _segment(cls, value: str) -> str:
        return check_segment(value, "a site or bay")

    @field_validator("broker", mode="before")
    @classmethod
    def _brokers(cls, value: object) -> object:
        if isinstance(value, str):
            return [u.strip() for u in value.split(",") if u.strip()]
        return value

    @field_validator("broker")
    @classmethod
    def _schemes(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one broker URL")
        for url in value:
            if not re.match(r"^mqtts?://[^/:\s]+(:\d{1,5})?/?$", url):
                raise ValueError(f"{url!r}: a broker URL is mqtt://HOST:PORT or mqtts://HOST:PORT")
        return value
