"""The retransmission fast path: recognise a stream's repeat without parsing it.

Almost every GOOSE frame is a retransmission: the same bytes as the stream's previous frame
except the sqNum content, and sometimes timeAllowedToLive (a publisher announcing a longer
TAL as its retransmissions slow down) and `t` (SEL relays refresh it on every frame). So
per stream we keep the last parsed frame and where those three contents sit; a new frame of
the same length whose bytes outside them are equal is the same frame with a new sqNum and
TAL, read with `int.from_bytes`. Four C-level slice compares replace a full header parse
(~6 us here). Anything else, including every state change, takes the full parse.

`stream_key` finds the stream of a frame (by its gocbRef TLV) from the bytes in a few
operations, so the fast path needs no parse to know which stream's memory to compare
against. What the subscriber does with a repeat (count it without a dispatch, or judge it
on its stream machine) is `subscriber.py`'s business.
"""

from __future__ import annotations

from goosectl.protocols.goose import GooseHeader, UtcTime, Vlan

TPID = b"\x81\x00"


def stream_key(buf: bytes) -> bytes | None:
    """The gocbRef TLV of a frame, the key the subscriber finds a stream's memory by; None
    if the frame is too short to hold one (the full parser will say what is wrong).

    It only finds the candidate: `Memory.repeat` compares every octet before TAL (MACs,
    VLAN tag, APPID, gocbRef) with the stream's last frame, so two streams sharing a
    gocbRef (another APPID or destination) cost each other the fast path, never a wrong
    verdict. One slice, where dst + APPID + gocbRef cost three and two joins (~0.4 us)."""
    try:
        p = 26 if buf[12] == 0x81 and buf[13] == 0 else 22  # goosePdu, behind a tag or not
        n = buf[p + 1]
        p += 2 if n < 0x80 else 2 + (n & 0x7F)
        return buf[p : p + 2 + buf[p + 1]]
    except IndexError:
        return None


#: goosePdu tags whose content may differ in a repeat: timeAllowedToLive, t, sqNum
TAL, T, SQ = 0x81, 0x84, 0x86
#: non_canonical names of the fields a repeat reads itself (always canonical, see `repeat`)
READ_HERE = ("timeAllowedtoLive", "sqNum")


def spans(buf: bytes) -> tuple[int, int, int, int, int, int] | None:
    """(start, stop) of the TAL, `t` and sqNum content octets, flattened, in a frame that
    parsed cleanly; None if the frame is unusual (long-form lengths before sqNum)."""
    off = 16 if buf[12:14] == TPID else 12
    p = off + 10
    n = buf[p + 1]
    p += 2 if n < 0x80 else 2 + (n & 0x7F)
    end = len(buf)
    found: dict[int, tuple[int, int]] = {}
    while p + 1 < end:
        tag, ln = buf[p], buf[p + 1]
        if ln >= 0x80 or tag == 0xAB:
            return None  # long-form lengths before sqNum: leave it to the full parse
        if tag in (TAL, T, SQ):
            found[tag] = (p + 2, p + 2 + ln)
            if tag == SQ:
                break
        p += 2 + ln
    if len(found) != 3:
        return None
    (a, b), (c, d), (e, f) = found[TAL], found[T], found[SQ]
    if not (0 < b - a <= 5 and d - c == 8 and 0 < f - e <= 5):
        return None  # TAL or sqNum padded beyond 5 octets: rare, the full parse reads it
    return a, b, c, d, e, f


def first_octet_mask(width: int) -> int:
    """Bits that must be clear in the first content octet of an unsigned 32-bit INTEGER of
    `width` octets for `int.from_bytes` to read what the full parse reads: the top bit up
    to 4 octets (set, the parse reads it unsigned and flags it), the whole octet at 5 (the
    padding real IEDs send, e.g. the GE/ITI demo frame; nonzero would not fit 32 bits)."""
    return 0x80 if width <= 4 else 0xFF


class Facts:
    """What a stream judges a frame by: the header's fields, duck-typed like `GooseHeader`.

    From a full parse it wraps the header; from a repeat it is the remembered frame's facts
    with the repeat's sqNum, TAL and `t` (allData bytes are identical, so decoding defers to
    `hdr`).
    """

    __slots__ = (
        "all_data",
        "conf_rev",
        "hdr",
        "nds_com",
        "non_canonical",
        "num_dat_set_entries",
        "reserved1",
        "simulation",
        "sq_num",
        "st_num",
        "t",
        "time_allowed_to_live",
    )

    def __init__(
        self,
        hdr: GooseHeader,
        sq_num: int | None = None,
        tal_ms: int = 0,
        t: UtcTime | None = None,
    ) -> None:
        self.hdr = hdr
        self.st_num = hdr.st_num
        self.simulation = hdr.simulation
        self.reserved1 = hdr.reserved1
        self.nds_com = hdr.nds_com
        self.conf_rev = hdr.conf_rev
        self.num_dat_set_entries = hdr.num_dat_set_entries
        self.all_data = hdr.all_data
        odd = hdr.non_canonical
        if sq_num is None:
            self.sq_num = hdr.sq_num
            self.time_allowed_to_live = hdr.time_allowed_to_live
            self.t = hdr.t
        else:
            self.sq_num = sq_num
            self.time_allowed_to_live = tal_ms
            self.t = hdr.t if t is None else t
            if odd:  # a repeat's sqNum and TAL are canonical (see Memory.repeat)
                odd = tuple(f for f in odd if f not in READ_HERE)
        self.non_canonical = odd

    def decode_all_data(self):
        return self.hdr.decode_all_data()


class Memory:
    """A stream's last parsed frame, cut around the contents a repeat may change."""

    __slots__ = (
        "buf",
        "cuts",
        "hdr",
        "head",
        "mid1",
        "mid2",
        "size",
        "sq_mask",
        "tag",
        "tail",
        "tal_mask",
        "vlan",
    )

    def __init__(self, buf: bytes, hdr: GooseHeader, tag: Vlan | None = None) -> None:
        self.buf = buf
        self.hdr = hdr
        self.vlan = hdr.vlan
        #: the VLAN tag the kernel stripped from this frame (None: none, or in the bytes);
        #: a repeat must come with the same
        self.tag = tag
        self.size = len(buf)
        #: cut on the first frame of the same length (`_cut`), not here: a new state (a
        #: trip) does not wait for the walk its retransmissions need
        self.cuts: tuple[int, int, int, int, int, int] | None = None

    def _cut(self) -> bool:
        """Find where TAL, `t` and sqNum sit; False (and never a repeat) if unusual."""
        cuts = spans(self.buf)
        if cuts is None:
            self.size = -1  # no frame has this length: never a repeat
            return False
        a, b, c, d, e, f = cuts
        buf = self.buf
        self.head, self.mid1, self.mid2, self.tail = buf[:a], buf[b:c], buf[d:e], buf[f:]
        self.tal_mask, self.sq_mask = first_octet_mask(b - a), first_octet_mask(f - e)
        self.cuts = cuts
        return True

    def repeat(self, buf: bytes) -> tuple[int, int] | None:
        """(sqNum, TAL ms) if `buf` is the remembered frame with at most sqNum, TAL and `t`
        changed (their lengths unchanged), else None."""
        if len(buf) != self.size:
            return None
        cuts = self.cuts
        if cuts is None:
            if not self._cut():
                return None
            cuts = self.cuts
        a, b, c, d, e, f = cuts  # type: ignore[misc]
        if (
            buf[f:] != self.tail
            or buf[:a] != self.head
            or buf[d:e] != self.mid2
            or buf[b:c] != self.mid1
        ):
            return None
        if buf[e] & self.sq_mask or buf[a] & self.tal_mask:
            return None  # read unsigned and flagged, or out of range: the full parse says
        return int.from_bytes(buf[e:f]), int.from_bytes(buf[a:b])  # big-endian

    def t_of(self, buf: bytes) -> UtcTime | None:
        """The repeat's `t` if it differs from the remembered frame's, else None."""
        c, d = self.cuts[2], self.cuts[3]  # type: ignore[index]
        if buf[c:d] == self.buf[c:d]:
            return None
        return UtcTime.from_bytes(buf, c)
