"""Classic BPF programs that keep everything but wanted GOOSE frames out of user space.

Why a kernel filter and not a Python `if`: a station bus carries far more than GOOSE (SV
at 4 kHz per merging unit, PTP, MMS), and every frame that reaches Python costs a
wake-up and a copy on the controller's two cores. The filter drops them in the kernel.

Why assembled here instead of compiled from a tcpdump expression (what scapy does): that
needs libpcap or the tcpdump binary at run time, and the expression language cannot say
"drop what this socket sent" (the PKTTYPE ancillary load can).

Why the destination MAC is checked here: a NIC's hardware multicast filter drops groups
nobody joined, but veth, bridges, and many NICs in all-multicast mode deliver every group
to every packet socket. Comparing the destination against the joined groups in the filter
makes "not subscribed means not delivered" true on every interface.

The program is data: a list of `Insn` (opcode, k, jump-if-true label, jump-if-false
label) and `Label` markers; `assemble` resolves labels into relative offsets.
"""

from __future__ import annotations

import ctypes
import socket
import struct
from collections.abc import Collection, Iterable, Sequence
from typing import NamedTuple

from goosectl.protocols.ethernet.mac import parse_mac
from goosectl.protocols.ethernet.vlan import TPID_CTAG, TPID_STAG

# linux/filter.h opcodes (class | size | mode).
LD_W_ABS = 0x20  # A = u32 at k
LD_H_ABS = 0x28  # A = u16 at k
JEQ_K = 0x15  # if A == k goto jt else goto jf
RET_K = 0x06  # accept k bytes (0 = drop)

SKF_AD_OFF = 0xFFFFF000  # -0x1000 as an unsigned k: ancillary data loads
SKF_AD_PKTTYPE = 4
PACKET_HOST = 0
PACKET_OUTGOING = 4

SO_ATTACH_FILTER = 26
ACCEPT_ALL_BYTES = 0x40000

ETH_P_GOOSE = 0x88B8

NEXT = None  # a jump target meaning "fall through to the next instruction"


class BpfError(ValueError):
    """A filter program that cannot be assembled (unknown label, jump too far, too long)."""


class Insn(NamedTuple):
    code: int
    k: int = 0
    jt: str | None = NEXT
    jf: str | None = NEXT


class Label(NamedTuple):
    name: str


Program = Sequence[Insn | Label]


def assemble(program: Program) -> bytes:
    """Resolve labels and pack `struct sock_filter` entries (u16 code, u8 jt, u8 jf, u32 k)."""
    positions: dict[str, int] = {}
    insns: list[Insn] = []
    for item in program:
        if isinstance(item, Label):
            if item.name in positions:
                raise BpfError(f"label {item.name!r} defined twice")
            positions[item.name] = len(insns)
        else:
            insns.append(item)
    if not 0 < len(insns) <= 4096:
        raise BpfError(f"a classic BPF program has 1..4096 instructions, got {len(insns)}")

    def offset(at: int, target: str | None) -> int:
        if target is None:
            return 0
        if target not in positions:
            raise BpfError(f"jump to unknown label {target!r} at instruction {at}")
        delta = positions[target] - at - 1
        if not 0 <= delta <= 255:
            raise BpfError(f"jump from {at} to {target!r} is {delta} (classic BPF allows 0..255)")
        return delta

    out = bytearray()
    for i, insn in enumerate(insns):
        out += struct.pack("=HBBI", insn.code, offset(i, insn.jt), offset(i, insn.jf), insn.k)
    return bytes(out)


def goose_program(
    groups: Iterable[bytes | str] = (),
    *,
    promiscuous: bool = False,
    ethertype: int = ETH_P_GOOSE,
) -> list[Insn | Label]:
    """Accept frames of ``ethertype`` (untagged or with one inline tag) not sent by us.

    Unless ``promiscuous``, also require the destination to be a joined group or this
    host's own unicast address (the kernel's PACKET_HOST classification).
    """
    prog: list[Insn | Label] = [
        Insn(LD_W_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
        Insn(JEQ_K, PACKET_OUTGOING, "drop", NEXT),
        Insn(LD_H_ABS, 12),
        Insn(JEQ_K, ethertype, "type_ok", NEXT),
        Insn(JEQ_K, TPID_CTAG, "tagged", NEXT),
        Insn(JEQ_K, TPID_STAG, "tagged", "drop"),
        Label("tagged"),
        Insn(LD_H_ABS, 16),
        Insn(JEQ_K, ethertype, "type_ok", "drop"),
        Label("type_ok"),
    ]
    if promiscuous:
        prog.append(Insn(RET_K, ACCEPT_ALL_BYTES))
    else:
        prog += [
            Insn(LD_W_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
            Insn(JEQ_K, PACKET_HOST, "accept", NEXT),
        ]
        for i, group in enumerate(dict.fromkeys(parse_mac(g) for g in groups)):
            miss = f"miss{i}"
            prog += [
                Insn(LD_W_ABS, 0),
                Insn(JEQ_K, int.from_bytes(group[:4], "big"), NEXT, miss),
                Insn(LD_H_ABS, 4),
                Insn(JEQ_K, int.from_bytes(group[4:], "big"), "accept", NEXT),
                Label(miss),
            ]
        prog += [Insn(RET_K, 0), Label("accept"), Insn(RET_K, ACCEPT_ALL_BYTES)]
    prog += [Label("drop"), Insn(RET_K, 0)]
    return prog


def capture_program(ethertypes: Collection[int] | None) -> list[Insn | Label]:
    """What `goosectl capture` keeps: every received frame (``ethertypes`` None), or those
    of the given EtherTypes, untagged or behind one inline tag; never what this host
    sent. Any destination: a capture is an observer, like tcpdump."""
    prog: list[Insn | Label] = [
        Insn(LD_W_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
        Insn(JEQ_K, PACKET_OUTGOING, "drop", NEXT),
    ]
    if ethertypes is not None:
        wanted = sorted(set(ethertypes))
        if not wanted:
            raise BpfError("capture_program needs at least one EtherType (or None: all)")
        prog.append(Insn(LD_H_ABS, 12))
        prog += [Insn(JEQ_K, t, "accept", NEXT) for t in wanted]
        prog += [
            Insn(JEQ_K, TPID_CTAG, "tagged", NEXT),
            Insn(JEQ_K, TPID_STAG, "tagged", "drop"),
            Label("tagged"),
            Insn(LD_H_ABS, 16),
        ]
        prog += [Insn(JEQ_K, t, "accept", NEXT) for t in wanted]
        prog.append(Insn(RET_K, 0))
    prog += [Label("accept"), Insn(RET_K, ACCEPT_ALL_BYTES), Label("drop"), Insn(RET_K, 0)]
    return prog


def attach(sock: socket.socket, program: Program) -> None:
    """Install (or atomically replace) the socket's filter; the kernel copies the program."""
    code = assemble(program)
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HL", len(code) // 8, ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
