"""GOOSE subscriptions and publications as validated configuration.

SCL conventions apply where users copy values from SCL: APPID and VLAN id may be given as
hex strings ("0x3001" or "3001" with `hex: true` style prefixes are not guessed: write
0x...), MinTime/MaxTime are milliseconds, and a stream is matched on (dst MAC, APPID,
gocbRef), never on APPID alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from goosectl.controller.config.base import Cfg
from goosectl.controller.config.prp import PrpCfg
from goosectl.protocols.ethernet.mac import MacError, parse_mac
from goosectl.protocols.ethernet.ring import RingSpec, RingSpecError


def _int_any(v: Any) -> Any:
    if isinstance(v, str):
        s = v.strip().lower()
        try:
            return int(s, 16) if s.startswith("0x") else int(s)
        except ValueError:
            raise ValueError(f"{v!r} is not a number (use decimal or 0x-prefixed hex)") from None
    return v


def _mac(v: Any) -> bytes:
    try:
        return parse_mac(v)
    except MacError as exc:
        raise ValueError(str(exc)) from None


def _mac_or_none(v: Any) -> bytes | None:
    """A source MAC: unicast and not all zeros (a frame from 00:00:00:00:00:00 has no
    sender a subscriber could check)."""
    if v is None:
        return None
    mac = _mac(v)
    if mac == bytes(6):
        raise ValueError(
            "00:00:00:00:00:00 is not a source address (leave src out to use the interface's)"
        )
    if mac[0] & 1:
        raise ValueError(f"{v!r} is a group address; a source MAC is unicast")
    return mac


def _shape(v: Any) -> Any:
    """Member types as written in a config -> the hashable form `data_shape` produces."""
    if isinstance(v, list):
        if len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], list):
            return (v[0], tuple(_shape(x) for x in v[1]))
        return tuple(_shape(x) for x in v)
    return v


def _members(v: Any) -> Any:
    """A data set's member list: each entry is one member (so `[boolean, [structure, [..]]]`
    is two members, not a structure named "boolean")."""
    return tuple(_shape(x) for x in v) if isinstance(v, list) else v


class VlanCfg(Cfg):
    id: int = Field(ge=0, le=4095)
    priority: int = Field(default=4, ge=0, le=7)

    _num = field_validator("id", mode="before")(_int_any)


class ABCfg(Cfg):
    """Receive the stream on two networks: interfaces A and B, or two VLAN ids on one."""

    mode: Literal["merge", "preferred"] = "merge"
    failback: Literal["auto", "manual"] = "auto"
    vlan_a: int | None = None
    vlan_b: int | None = None


class RgooseCfg(Cfg):
    """R-GOOSE for a subscription (docs/security-62351-6.md): its SPDUs are received on UDP
    besides raw Ethernet, into the same stream, gates and policy."""

    # a multicast group to join, or a unicast address of this host to bind
    address: str
    port: int = Field(default=102, ge=1, le=65535)
    # the IPv4 address of the interface to join the group on ("" = the kernel's choice)
    iface: str = ""

    @field_validator("address", "iface")
    @classmethod
    def _ipv4(cls, v: str) -> str:
        if v:
            parts = v.split(".")
            if len(parts) != 4 or not all(p.isdigit() and int(p) <= 255 for p in parts):
                raise ValueError(f"{v!r} is not an IPv4 address")
        return v


class SubscriptionCfg(Cfg):
    name: str | None = None
    gocb_ref: str
    appid: int = Field(ge=0, le=0xFFFF)
    dst: bytes
    go_id: str | None = None
    dat_set: str | None = None
    conf_rev: int | None = None
    vlan: int | None = Field(default=None, ge=0, le=4095)
    members: tuple | None = None
    ab: ABCfg | None = None
    # the publisher's MinTime/MaxTime as SCL declares them: the wire check (`--scl`)
    # compares retransmission intervals with them; supervision itself follows each frame's TAL
    min_time_ms: float | None = Field(default=None, gt=0)
    max_time_ms: float | None = Field(default=None, gt=0)
    # the publisher's source MAC; without it the first one seen is expected (a frame of the
    # same stream from another source is a `foreign_source` anomaly, never data)
    src: bytes | None = None
    # IEC 62351-6 (docs/security-62351-6.md): off, optional (signed frames must verify) or
    # required (only verified frames reach the stream); an SCL's securityEnable sets it
    auth: Literal["off", "optional", "required"] = "off"
    # R-GOOSE: also receive this stream's SPDUs over UDP (`run`)
    rgoose: RgooseCfg | None = None

    _num = field_validator("appid", "vlan", mode="before")(_int_any)
    _dst = field_validator("dst", mode="before")(_mac)
    _src = field_validator("src", mode="before")(_mac_or_none)
    _members = field_validator("members", mode="before")(_members)

    @model_validator(mode="after")
    def _auth_key(self) -> SubscriptionCfg:
        # the gate finds a frame's policy by its gocbRef TLV read with a one-octet length;
        # a longer gocbRef would miss its policy (and fail open): refused here instead
        if self.auth != "off" and len(self.gocb_ref.encode()) > 127:
            raise ValueError("auth needs a gocb_ref of at most 127 octets")
        return self

    @property
    def key(self) -> tuple[bytes, int, str]:
        return (self.dst, self.appid, self.gocb_ref)

    @property
    def label(self) -> str:
        return self.name or self.gocb_ref


class PublisherCfg(Cfg):
    name: str | None = None
    gocb_ref: str
    dat_set: str
    go_id: str | None = None
    conf_rev: int = Field(default=1, ge=0, le=0xFFFFFFFF)
    appid: int = Field(ge=0, le=0xFFFF)
    dst: bytes
    # the source MAC; without it the interface's own (`goosectl run`), or
    # `publisher.REPLAY_SRC` in a replay or the demo
    src: bytes | None = None
    vlan: VlanCfg | None = None
    simulation: bool = False
    nds_com: bool = False
    members: tuple = ()
    initial: list[Any] = Field(default_factory=list)
    schedule: Literal["doubling", "fixed-burst"] = "doubling"
    min_time_ms: float = Field(default=4.0, gt=0)
    max_time_ms: float = Field(default=1000.0, gt=0)
    burst_count: int = Field(default=4, ge=1, le=1000)
    tal_factor: float = Field(default=2.0, gt=0)
    sides: Literal["A", "B", "both"] = "A"
    # the publication rate limit: at most max_changes new states (stNum) within any
    # change_window_ms; a change beyond it is held back (the latest wins) and published
    # when the oldest leaves the window, counted (`coalesced`) and alarmed
    # (`publish_rate:<gocbRef>`). Generous: a trip, an auto-reclose and a close take a few.
    max_changes: int = Field(
        default=20, ge=1, description="new states (stNum) per change_window_ms at most"
    )
    change_window_ms: float = Field(default=1000.0, gt=0)
    # IEC 62351-6: `sign` signs every frame (retransmissions too) with the key `key_id`
    # of the key file, or with its successor in force (docs/security-62351-6.md)
    auth: Literal["off", "sign"] = "off"
    key_id: int | None = Field(default=None, ge=1, le=0xFFFFFFFF)

    _num = field_validator("appid", mode="before")(_int_any)
    _dst = field_validator("dst", mode="before")(_mac)
    _src = field_validator("src", mode="before")(_mac_or_none)
    _members = field_validator("members", mode="before")(_members)

    @model_validator(mode="after")
    def _times(self) -> PublisherCfg:
        if self.max_time_ms < self.min_time_ms:
            raise ValueError("max_time_ms must be >= min_time_ms")
        if self.auth == "sign" and self.key_id is None:
            raise ValueError("auth: sign needs a key_id (of the key file, goose.keys)")
        return self


class RxRingCfg(Cfg):
    """The receive ring of each interface (`protocols.ethernet.ring`): how deep a burst it
    holds with nobody reading. `version` 3 packs frames in blocks (what `listen` uses), 2
    gives every frame a slot and a wake-up (what `run` uses, for latency), 0 turns the ring
    off (the socket's receive buffer, a few hundred frames); unset, the command chooses."""

    version: Literal[0, 2, 3] | None = None
    frames: int = 10_000
    frame_bytes: int = 1518
    block_kib: int = 8
    retire_ms: int = 1

    @model_validator(mode="after")
    def _buildable(self) -> RxRingCfg:
        kib = self.block_kib
        if kib < 4 or kib & (kib - 1):
            raise ValueError(f"block_kib: {kib} is not a power of two of at least 4 (a page)")
        try:
            self.spec(3)
            self.spec(2)
        except RingSpecError as exc:
            raise ValueError(
                str(exc).replace(f"block_bytes: {kib * 1024}", f"block_kib: {kib}")
            ) from None
        return self

    def spec(self, default_version: int) -> RingSpec | None:
        """The ring to ask for; None when turned off (`version: 0`)."""
        version = default_version if self.version is None else self.version
        if version == 0:
            return None
        return RingSpec(version, self.frames, self.frame_bytes, self.block_kib * 1024,
                        self.retire_ms)  # fmt: skip


class ReceiveCfg(Cfg):
    """How far a subscriber trusts what a frame says about itself (no IEC 62351-6 needed).

    A received timeAllowedToLive keeps a stream alive; a forged one of 49.7 days must not,
    so the TAL supervised is the least of the frame's, `tal_factor` x the subscription's
    MaxTime (configured or from the SCL) and `tal_cap_ms`. A new state whose `t` is older
    than the stream's last `t` by more than `t_skew_ms` is a replay (`stale`): counted,
    shown, never delivered; equal or slightly older `t` is normal (IEDs stamp `t` coarsely,
    e.g. at 1/64 s, so two changes a few ms apart can carry the same `t`)."""

    tal_factor: float = Field(
        default=4.0,
        gt=1.0,
        description="TAL supervised at most this many times the subscription's MaxTime",
    )
    tal_cap_ms: int = Field(
        default=60_000,
        ge=1,
        description="TAL supervised at most this long, with or without a MaxTime",
    )
    t_skew_ms: float = Field(
        default=100.0,
        ge=0,
        description="a new state's `t` may be older than the stream's last `t` by this much",
    )


class GooseConfig(Cfg):
    interface_a: str | None = None
    interface_b: str | None = None
    rx_ring: RxRingCfg = Field(default_factory=RxRingCfg)
    receive: ReceiveCfg = Field(default_factory=ReceiveCfg)
    prp: PrpCfg = Field(
        default_factory=PrpCfg,
        description="PRP (IEC 62439-3): off, native (goosectl is the LRE on interface_a and "
        "interface_b) or kernel (interface_a is the kernel's PRP device); see docs/prp.md",
    )
    subscriptions: list[SubscriptionCfg] = Field(default_factory=list)
    publishers: list[PublisherCfg] = Field(default_factory=list)
    max_streams: int = Field(
        default=10_000,
        ge=1,
        description="observer mode (no subscriptions): streams supervised at most; beyond, "
        "the one idle longest is forgotten (counted: evicted)",
    )
    # the key file of IEC 62351-6 signing and verifying (controller/config/keys.py), and
    # how Reserved1/Reserved2 announce the extension (protocols/goose/security.PROFILES)
    keys: str | None = None
    auth_profile: Literal["length-crc", "flag-length"] = "length-crc"

    @model_validator(mode="after")
    def _unique(self) -> GooseConfig:
        seen: set = set()
        for i, s in enumerate(self.subscriptions):
            if s.key in seen:
                raise ValueError(f"subscriptions[{i}]: duplicate stream (dst, appid, gocb_ref)")
            seen.add(s.key)
        return self
