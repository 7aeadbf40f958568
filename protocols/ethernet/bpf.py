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

Why the stream (APPID and gocbRef) is checked here too, when subscriptions say which
streams are wanted: a flood of valid-looking frames of other streams sent to the
subscribed address passes the destination check, and every such frame that reaches user
space costs the receive loop a wake-up, a ring slot and Python's per-frame work. At
100,000 frames/s that work alone kept a genuine trip waiting behind the flood. Compared
in the kernel (`stream_filter`: the APPID at its fixed offset, the gocbRef TLV behind the
goosePdu's BER length, whose size the program reads), a foreign frame costs a few dozen
BPF instructions in the softirq and never enters the ring.

The program is data: a list of `Insn` (opcode, k, jump-if-true label, jump-if-false
label) and `Label` markers; `assemble` resolves labels into relative offsets. `run`
executes an assembled program on a frame with the kernel's semantics, so a program's
verdicts can be property-tested without a socket.
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
LD_B_ABS = 0x30  # A = u8 at k
LD_W_IND = 0x40  # A = u32 at X + k
LD_H_IND = 0x48  # A = u16 at X + k
LD_B_IND = 0x50  # A = u8 at X + k
LD_IMM = 0x00  # A = k
LD_MEM = 0x60  # A = M[k]
LDX_IMM = 0x01  # X = k
ST = 0x02  # M[k] = A
ADD_K = 0x04  # A += k
ADD_X = 0x0C  # A += X
AND_K = 0x54  # A &= k
TAX = 0x07  # X = A
JA = 0x05  # goto jt (unconditional; the offset goes in k)
JEQ_K = 0x15  # if A == k goto jt else goto jf
JGT_K = 0x25  # if A > k goto jt else goto jf
JGE_K = 0x35  # if A >= k goto jt else goto jf
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

    def offset(at: int, target: str | None, most: int = 255) -> int:
        if target is None:
            return 0
        if target not in positions:
            raise BpfError(f"jump to unknown label {target!r} at instruction {at}")
        delta = positions[target] - at - 1
        if not 0 <= delta <= most:
            raise BpfError(
                f"jump from {at} to {target!r} is {delta} (classic BPF allows 0..{most})"
            )
        return delta

    out = bytearray()
    for i, insn in enumerate(insns):
        if insn.code == JA:  # the one jump whose offset is k (32 bits), not jt/jf
            out += struct.pack("=HBBI", JA, 0, 0, offset(i, insn.jt, 0xFFFFFFFF))
            continue
        out += struct.pack("=HBBI", insn.code, offset(i, insn.jt), offset(i, insn.jf), insn.k)
    return bytes(out)


class StreamMatch(NamedTuple):
    """One wanted stream as the kernel checks it: its destination, and its APPID and
    gocbRef (None: any). What a subscription names, so a frame of another stream on the
    same address is dropped before it is queued."""

    dst: bytes
    appid: int | None = None
    gocb_ref: str | None = None


#: the longest gocbRef TLV compared in the kernel: a stream block must stay within a
#: conditional jump's 255 instructions (a longer one is checked by dst and APPID only)
MAX_TLV = 400


def goose_program(
    groups: Iterable[bytes | str] = (),
    *,
    streams: Iterable[StreamMatch] = (),
    promiscuous: bool = False,
    ethertype: int = ETH_P_GOOSE,
) -> list[Insn | Label]:
    """Accept frames of ``ethertype`` (untagged or with one inline tag) not sent by us.

    Unless ``promiscuous``, also require the destination to be a joined group or this
    host's own unicast address (the kernel's PACKET_HOST classification). With
    ``streams``, a frame must be one of them (`stream_filter`); a group no stream is sent
    to still accepts every frame to it.
    """
    wanted = list(dict.fromkeys(streams))
    if wanted and not promiscuous:
        return stream_filter(groups, wanted, ethertype)
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


def _dst_block(dst: bytes, miss: str) -> list[Insn | Label]:
    """Fall through when the destination MAC is ``dst``, else go to ``miss``."""
    return [
        Insn(LD_W_ABS, 0),
        Insn(JEQ_K, int.from_bytes(dst[:4], "big"), NEXT, miss),
        Insn(LD_H_ABS, 4),
        Insn(JEQ_K, int.from_bytes(dst[4:], "big"), NEXT, miss),
    ]


def gocb_tlv(gocb_ref: str) -> bytes:
    """The gocbRef TLV as a publisher encodes it (context tag 0, BER definite length)."""
    ref = gocb_ref.encode()
    n = len(ref)
    size = bytes((n,)) if n < 0x80 else (b"\x81" + bytes((n,)) if n < 0x100 else b"\x82")
    if n >= 0x100:
        size += n.to_bytes(2, "big")
    return b"\x80" + size + ref


def _bytes_block(data: bytes, miss: str) -> list[Insn | Label]:
    """Fall through when the packet holds ``data`` at X, else go to ``miss`` (a packet too
    short for a load is dropped by the kernel, which is what a miss would do)."""
    out: list[Insn | Label] = []
    at = 0
    for size, load in ((4, LD_W_IND), (2, LD_H_IND), (1, LD_B_IND)):
        while len(data) - at >= size:
            word = int.from_bytes(data[at : at + size], "big")
            out += [Insn(load, at), Insn(JEQ_K, word, NEXT, miss)]
            at += size
    return out


def stream_filter(
    groups: Iterable[bytes | str], streams: Sequence[StreamMatch], ethertype: int = ETH_P_GOOSE
) -> list[Insn | Label]:
    """Accept a frame of ``ethertype`` not sent by us only if it is one of ``streams`` (its
    destination, APPID and gocbRef TLV), or sent to one of ``groups`` no stream names.

    The offsets: the EtherType at 12 (16 behind an inline tag; the kernel has stripped the
    outer one into metadata by the time a packet socket's filter runs), the APPID right
    after it, the goosePdu tag 0x61 eight octets after the EtherType's end, then its BER
    length (one octet, or 0x8n and n octets), then the gocbRef TLV, the goosePdu's first
    field. A frame cut short before the end of what is compared is dropped here (a frame
    the parser could only call malformed, of a stream that cannot be told).
    """
    named = {s.dst for s in streams}
    bare = [g for g in dict.fromkeys(parse_mac(g) for g in groups) if g not in named]
    prog = _goose_ethertype(ethertype)
    for i, group in enumerate(bare):
        prog += _dst_block(group, f"bare{i}")
        prog += [Insn(RET_K, ACCEPT_ALL_BYTES), Label(f"bare{i}")]
    prog += _to_gocb_ref()
    for i, s in enumerate(streams):
        prog += _stream_block(s, f"miss{i}")
    prog.append(Insn(RET_K, 0))
    return prog


def _goose_ethertype(ethertype: int) -> list[Insn | Label]:
    """Not sent by us, `ethertype` at 12 or behind an inline tag at 16; X left at the
    EtherType's end (14 or 18). Every jump to a drop stays short: a RET 0 right after the
    checks that need it."""
    return [
        Insn(LD_W_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
        Insn(JEQ_K, PACKET_OUTGOING, "drop", NEXT),
        Insn(LD_H_ABS, 12),
        Insn(JEQ_K, ethertype, "untagged", NEXT),
        Insn(JEQ_K, TPID_CTAG, "tagged", NEXT),
        Insn(JEQ_K, TPID_STAG, "tagged", "drop"),
        Label("tagged"),
        Insn(LD_H_ABS, 16),
        Insn(JEQ_K, ethertype, NEXT, "drop"),
        Insn(LDX_IMM, 18),
        Insn(JA, jt="based"),
        Label("drop"),
        Insn(RET_K, 0),
        Label("untagged"),
        Insn(LDX_IMM, 14),
        Label("based"),
    ]


def _to_gocb_ref() -> list[Insn | Label]:
    """The APPID into M[0], then X moved past the goosePdu tag and its BER length to the
    gocbRef TLV (a frame without a goosePdu, or with a length over 4 octets, dropped)."""
    return [
        Insn(LD_H_IND, 0),  # the APPID, kept in M[0] while X moves on to the gocbRef
        Insn(ST, 0),
        Insn(LD_B_IND, 8),
        Insn(JEQ_K, 0x61, NEXT, "no_pdu"),
        Insn(LD_B_IND, 9),
        Insn(JGE_K, 0x80, "long", NEXT),
        Insn(LD_IMM, 10),
        Insn(JA, jt="gocb"),
        Label("long"),
        Insn(AND_K, 0x7F),
        Insn(JGT_K, 4, "no_pdu", NEXT),
        Insn(ADD_K, 10),
        Label("gocb"),
        Insn(ADD_X),
        Insn(TAX),
        Insn(JA, jt="streams"),
        Label("no_pdu"),
        Insn(RET_K, 0),
        Label("streams"),
    ]


def _stream_block(s: StreamMatch, miss: str) -> list[Insn | Label]:
    """Accept a frame of stream `s` (destination, then APPID and gocbRef TLV if it names
    them; a TLV too long to compare is not compared), else on to `miss`."""
    block = _dst_block(parse_mac(s.dst), miss)
    if s.appid is not None:
        block += [Insn(LD_MEM, 0), Insn(JEQ_K, s.appid, NEXT, miss)]
    if s.gocb_ref is not None:
        tlv = gocb_tlv(s.gocb_ref)
        if len(tlv) <= MAX_TLV:
            block += _bytes_block(tlv, miss)
    return [*block, Insn(RET_K, ACCEPT_ALL_BYTES), Label(miss)]


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


PACKET_MULTICAST = 2


class Verdict(NamedTuple):
    """What a program decided for one packet: bytes kept (0: dropped), instructions run."""

    accept: int
    steps: int


def run(code: bytes, packet: bytes, pkttype: int = PACKET_MULTICAST) -> Verdict:
    """Execute an assembled program on ``packet`` (as the filter sees it: the outer VLAN
    tag already stripped) with the kernel's semantics for the instructions this module
    emits: a load past the end drops the packet, M[] starts zeroed, arithmetic is u32.
    Why: the filters' verdicts are property-tested against it, and its step count is the
    exact in-kernel cost of a verdict."""
    insns = [struct.unpack_from("=HBBI", code, i) for i in range(0, len(code), 8)]
    a = x = 0
    mem = [0] * 16
    pc = steps = 0
    while True:
        if not 0 <= pc < len(insns):
            raise BpfError(f"program runs off its end at {pc}")
        op, jt, jf, k = insns[pc]
        steps += 1
        pc += 1
        if op in _LOADS:
            size, indexed = _LOADS[op]
            at = (x + k) & 0xFFFFFFFF if indexed else k
            if not indexed and k == SKF_AD_OFF + SKF_AD_PKTTYPE:
                a = pkttype
                continue
            if at + size > len(packet):
                return Verdict(0, steps)
            a = int.from_bytes(packet[at : at + size], "big")
        elif op == LD_IMM:
            a = k
        elif op == LD_MEM:
            a = mem[k]
        elif op == LDX_IMM:
            x = k
        elif op == ST:
            mem[k] = a
        elif op == ADD_K:
            a = (a + k) & 0xFFFFFFFF
        elif op == ADD_X:
            a = (a + x) & 0xFFFFFFFF
        elif op == AND_K:
            a &= k
        elif op == TAX:
            x = a
        elif op == JA:
            pc += k
        elif op in _JUMPS:
            pc += jt if _JUMPS[op](a, k) else jf
        elif op == RET_K:
            return Verdict(k, steps)
        else:
            raise BpfError(f"opcode {op:#04x} at {pc - 1} is not one this module emits")


_LOADS = {
    LD_W_ABS: (4, False),
    LD_H_ABS: (2, False),
    LD_B_ABS: (1, False),
    LD_W_IND: (4, True),
    LD_H_IND: (2, True),
    LD_B_IND: (1, True),
}
_JUMPS = {
    JEQ_K: lambda a, k: a == k,
    JGT_K: lambda a, k: a > k,
    JGE_K: lambda a, k: a >= k,
}
