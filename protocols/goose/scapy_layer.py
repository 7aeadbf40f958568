"""A scapy `GOOSE` layer for interactive use; all parsing and building is the codec's.

Importing this module binds EtherType 0x88B8 under Ether and Dot1Q, so in a scapy shell
``Ether(dst=..)/Dot1Q(vlan=10)/GOOSE(gocbRef=.., allData=(Boolean(True),))`` builds a
frame and ``Ether(raw).show()`` displays one. The layer never walks the BER itself: it
hands the bytes to `decode_frame` / `encode_frame`, so scapy and the controller cannot
disagree about what a frame means. It is for people, not for the hot path (scapy's own
packet machinery costs far more than the codec; see benchmarks/test_codec_bench.py).
"""

from __future__ import annotations

from typing import Any

try:
    from scapy.config import conf
    from scapy.fields import Field
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Packet, bind_layers
except ImportError as exc:  # scapy is an extra: no command needs it, only this layer
    raise ImportError(
        f"goosectl.protocols.goose.scapy_layer needs scapy ({exc}): pip install 'goosectl[scapy]'",
        name=exc.name,
    ) from exc

from goosectl.protocols.goose.data import Data
from goosectl.protocols.goose.frame import GooseFrame, decode_frame, encode_frame
from goosectl.protocols.goose.header import ETHERTYPE_GOOSE
from goosectl.protocols.goose.jsonform import to_json
from goosectl.protocols.goose.utctime import UtcTime

_FAKE_ETHERNET = bytes(12) + ETHERTYPE_GOOSE.to_bytes(2, "big")


class _CodecField(Field[Any, Any]):
    """A field whose bytes are handled by the codec; it only stores and displays a value."""

    __slots__ = ("attr", "fmt")

    def __init__(self, name: str, default: Any, attr: str | None, fmt: str = "repr") -> None:
        super().__init__(name, default)
        self.attr = attr
        self.fmt = fmt

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        if x is None:
            return "None"
        if self.fmt == "hex":
            return f"0x{x:04x}"
        if self.fmt == "time" and isinstance(x, UtcTime):
            return f"{x.iso()} (quality 0x{x.quality:02x})"
        if self.fmt == "data":
            return repr([to_json(v) for v in x])
        return repr(x)

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:  # pragma: no cover
        raise NotImplementedError("GOOSE fields are built by the codec (GOOSE.self_build)")

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:  # pragma: no cover
        raise NotImplementedError("GOOSE fields are parsed by the codec (GOOSE.do_dissect)")


#: (scapy field name, GooseFrame attribute, default, display format)
_FIELDS = (
    ("appid", "appid", 0, "hex"),
    ("length", None, None, "repr"),
    ("reserved1", "reserved1", 0, "hex"),
    ("reserved2", "reserved2", 0, "hex"),
    ("gocbRef", "gocb_ref", "", "repr"),
    ("timeAllowedtoLive", "time_allowed_to_live", 2000, "repr"),
    ("datSet", "dat_set", "", "repr"),
    ("goID", "go_id", None, "repr"),
    ("t", "t", UtcTime(0), "time"),
    ("stNum", "st_num", 1, "repr"),
    ("sqNum", "sq_num", 0, "repr"),
    ("simulation", "simulation", False, "repr"),
    ("confRev", "conf_rev", 1, "repr"),
    ("ndsCom", "nds_com", False, "repr"),
    ("numDatSetEntries", "num_dat_set_entries", None, "repr"),
    ("allData", "all_data", (), "data"),
    ("security", "security", b"", "repr"),
    ("intWidths", "int_widths", None, "repr"),
)


class GOOSE(Packet):
    """IEC 61850-8-1 GOOSE (APPID .. goosePdu), delegating to protocols.goose."""

    name = "GOOSE"
    fields_desc = [_CodecField(n, d, a, f) for n, a, d, f in _FIELDS]

    def do_dissect(self, s: bytes) -> bytes:
        frame = decode_frame(_FAKE_ETHERNET + bytes(s))
        for fname, attr, _d, _f in _FIELDS:
            if attr is not None:
                self.fields[fname] = getattr(frame, attr)
        self.fields["length"] = len(s) - len(frame.trailer)
        self.raw_packet_cache = None
        return frame.trailer

    def to_frame(self) -> GooseFrame:
        """The GooseFrame these field values describe (Ethernet part left at defaults)."""
        values = {
            attr: self.getfieldval(fname) for fname, attr, _d, _f in _FIELDS if attr is not None
        }
        values["all_data"] = tuple(values["all_data"])
        return GooseFrame(**values)

    def self_build(self) -> bytes:
        raw = encode_frame(self.to_frame())[len(_FAKE_ETHERNET) :]
        length = self.getfieldval("length")
        # A dissected or explicit Length is kept, as for any scapy length field (so a
        # crafted wrong Length survives); `del pkt[GOOSE].length` to recompute it.
        if length is not None:
            raw = raw[:2] + int(length).to_bytes(2, "big") + raw[4:]
        return raw

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return conf.padding_layer

    def mysummary(self) -> str:
        return self.sprintf(
            "GOOSE appid=%GOOSE.appid% %GOOSE.gocbRef% stNum=%GOOSE.stNum% sqNum=%GOOSE.sqNum%"
        )


def data_values(pkt: Packet) -> tuple[Data, ...]:
    """allData of the GOOSE layer of ``pkt`` (convenience for interactive sessions)."""
    return tuple(pkt[GOOSE].allData)


bind_layers(Ether, GOOSE, type=ETHERTYPE_GOOSE)
bind_layers(Dot1Q, GOOSE, type=ETHERTYPE_GOOSE)
