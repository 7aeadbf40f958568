"""Live frames to pcapng: the loop behind `goosectl capture`.

Why its own sockets and loop, not `LiveGoose`: a capture must change nothing on the
controller's path, so it opens a second packet socket per interface (the kernel hands
each socket its own copy) and never feeds a hub. It receives through the same memory-mapped
rings `listen` uses (`protocols.ethernet.ring`, TPACKET_V3 by default), so a line-rate burst
waits in memory while it is written, and the kernel's drop counts (PACKET_STATISTICS) go
into the file's statistics blocks at the end: a loss is never silent.

What the file shows is what was on the wire: the kernel strips the outer VLAN tag before
any packet socket sees the frame and reports it beside the bytes (the ring header, or
PACKET_AUXDATA without a ring); `CaptureSocket` marks such a tag, and `wire_bytes` puts
it back after the MAC addresses, as libpcap does. A tag still inline (an inner tag of a
double-tagged frame) is left where it is.
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from goosectl.controller import __version__
from goosectl.protocols.ethernet import bpf
from goosectl.protocols.ethernet.pcapng import InterfaceInfo, InterfaceStats, PcapngWriter
from goosectl.protocols.ethernet.rawsock import RawSocket, RingSpec, RxFrame
from goosectl.protocols.ethernet.vlan import VlanTag, insert_tag

#: `--filter`: the EtherTypes kept (None: every frame). PRP adds no EtherType to a data
#: frame (its trailer sits at the end), so `prp` is GOOSE plus PRP supervision (0x88FB).
FILTERS: dict[str, frozenset[int] | None] = {
    "goose": frozenset({bpf.ETH_P_GOOSE}),
    "prp": frozenset({bpf.ETH_P_GOOSE, 0x88FB}),
    "all": None,
}
FILTER_TEXT = {"goose": "ether proto 0x88b8", "prp": "ether proto 0x88b8 or ether proto 0x88fb"}
#: How long one wait for frames lasts at most (stop conditions are checked between waits)
POLL_S = 0.1


class KernelTag(VlanTag):
    """A VLAN tag the kernel took out of the frame's bytes (reported in the ring header
    or PACKET_AUXDATA): the capture puts it back. A plain `VlanTag` was read inline."""

    __slots__ = ()


class CaptureSocket(RawSocket):
    """A `RawSocket` that keeps every frame of the chosen EtherTypes (any destination)
    and marks the tags the kernel stripped, so they can be restored."""

    def __init__(
        self, iface: str, ethertypes: frozenset[int] | None, ring: RingSpec | None
    ) -> None:
        self.capture_types = ethertypes
        super().__init__(iface, promiscuous=True, ring=ring)

    def _refilter(self) -> None:
        bpf.attach(self._sock, bpf.capture_program(self.capture_types))

    def _vlan(self, tci: int, tpid: int) -> VlanTag:
        return KernelTag.from_tci(tci, tpid)


def wire_bytes(rx: RxFrame) -> bytes:
    """The frame as it was on the wire: the tag the kernel stripped put back."""
    if isinstance(rx.vlan, KernelTag):
        return insert_tag(rx.frame, rx.vlan)
    return rx.frame


def rotated_name(path: Path, index: int) -> Path:
    """The name of rotated file ``index`` (1-based): ``cap.pcapng`` -> ``cap_00001.pcapng``."""
    return path.with_name(f"{path.stem}_{index:05d}{path.suffix}")


@dataclass
class CaptureSpec:
    """What to capture and when to stop: ``count`` frames, ``duration_s`` seconds, or a
    signal; with ``rotate_bytes`` a new file whenever one grows past it, the newest
    ``keep`` kept (0: all)."""

    path: Path
    ifaces: dict[str, str]
    filter: str = "goose"
    count: int | None = None
    duration_s: float | None = None
    rotate_bytes: int | None = None
    keep: int = 0
    ring: RingSpec | None = field(default_factory=lambda: RingSpec(version=3))


class Capture:
    """Sockets per side, the current writer, counters. `run` until a stop condition."""

    def __init__(self, spec: CaptureSpec) -> None:
        self.spec = spec
        self.sides = list(spec.ifaces)
        self.socks: dict[str, CaptureSocket] = {}
        types = FILTERS[spec.filter]
        try:
            for side, iface in spec.ifaces.items():
                self.socks[side] = CaptureSocket(iface, types, spec.ring)
        except BaseException:
            self.close_sockets()
            raise
        self.frames = 0
        self.files: list[Path] = []
        self.removed: list[Path] = []
        self.writer: PcapngWriter | None = None
        self.start_ns = time.time_ns()
        self.stopped = False
        self.on_rotate: Callable[[Path], None] | None = None

    def _interfaces(self) -> list[InterfaceInfo]:
        text = FILTER_TEXT.get(self.spec.filter, "")
        return [
            InterfaceInfo(self.spec.ifaces[s], f"LAN {s}", text) for s in self.sides
        ]  # fmt: skip

    def _open(self) -> None:
        n = len(self.files) + 1
        path = rotated_name(self.spec.path, n) if self.spec.rotate_bytes else self.spec.path
        self.writer = PcapngWriter(
            path,
            self._interfaces(),
            userappl=f"goosectl {__version__}",
            comment=f"captured by goosectl {__version__} (goosectl capture)",
            os_name=f"{os.uname().sysname} {os.uname().release}",
        )
        self.files.append(path)
        keep = self.spec.keep
        if keep and len(self.files) - len(self.removed) > keep:
            old = self.files[len(self.removed)]
            old.unlink(missing_ok=True)
            self.removed.append(old)

    def interface_stats(self) -> list[InterfaceStats]:
        """The kernel's counters per side since the capture began (read now)."""
        now = time.time_ns()
        out = []
        for s in self.sides:
            k = self.socks[s].kernel_stats()
            out.append(InterfaceStats(k.packets, k.drops, self.start_ns, now))
        return out

    def _close_writer(self) -> None:
        if self.writer is not None:
            self.writer.close(self.interface_stats(), time.time_ns())
            if self.on_rotate is not None:
                self.on_rotate(self.writer.path)
            self.writer = None

    def stop(self) -> None:
        self.stopped = True

    def run(self) -> None:
        """Capture until ``count`` frames, ``duration_s`` or `stop`; the file is closed with
        its statistics blocks either way."""
        spec = self.spec
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.sides):
            sel.register(self.socks[s].fileno(), selectors.EVENT_READ, i)
        until = time.monotonic() + spec.duration_s if spec.duration_s is not None else None
        self._open()
        try:
            while not self.stopped:
                timeout = POLL_S
                if until is not None:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    timeout = min(timeout, left)
                for key, _ in sel.select(timeout):
                    if self._drain(key.data):
                        return
        finally:
            sel.close()
            self._close_writer()

    def _drain(self, iface_id: int) -> bool:
        """Write what one side has queued; True when the frame count is reached."""
        sock = self.socks[self.sides[iface_id]]
        spec = self.spec
        while True:
            batch = sock.recv_batch(256)
            if not batch:
                return False
            for rx in batch:
                writer = self.writer
                assert writer is not None
                if spec.rotate_bytes and writer.count and writer.size >= spec.rotate_bytes:
                    self._close_writer()
                    self._open()
                    writer = self.writer
                    assert writer is not None
                writer.write(iface_id, rx.ts_ns or time.time_ns(), wire_bytes(rx))
                self.frames += 1
                if spec.count is not None and self.frames >= spec.count:
                    return True

    def summary(self) -> dict[str, object]:
        """Frames written, files, and per side the kernel's counters (as `listen` names them)."""
        sides = {}
        for s in self.sides:
            sock = self.socks[s]
            k = sock.kernel
            sides[s] = {
                "iface": sock.iface,
                "rx": sock.rx_mode,
                "received": sock.stats.received,
                "drops": k.drops,
                "freeze": k.freeze,
                "kernel_packets": k.packets,
            }
        kept = [str(p) for p in self.files if p not in self.removed]
        return {"event": "capture", "frames": self.frames, "files": kept, "sides": sides}

    def close_sockets(self) -> None:
        for sock in self.socks.values():
            sock.close()
