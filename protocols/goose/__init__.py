"""IEC 61850-8-1 GOOSE codec: frame + goosePdu BER, MMS Data model, JSON form.

Bytes only: no clock, no I/O, no policy. See README.md for the module map and caps.
The scapy layer lives in `protocols.goose.scapy_layer` and is not imported here, so the
codec loads without scapy's start-up cost.
"""

from goosectl.protocols.goose.data import (
    Array,
    Bcd,
    BinaryTime,
    BitString,
    Boolean,
    BooleanArray,
    Data,
    Dbpos,
    FloatingPoint,
    Integer,
    MmsString,
    ObjId,
    OctetString,
    Quality,
    Real,
    Structure,
    Unsigned,
    VisibleString,
    data_shape,
)
from goosectl.protocols.goose.datacodec import (
    MAX_DEPTH,
    MAX_ELEMENTS,
    decode_all_data,
    decode_data,
    encode_all_data,
    encode_data,
)
from goosectl.protocols.goose.errors import (
    BadLength,
    BadTag,
    BadValue,
    GooseError,
    Truncated,
    TypeMismatch,
)
from goosectl.protocols.goose.frame import GooseFrame, decode_frame, encode_frame, mac, mac_str
from goosectl.protocols.goose.header import (
    ETHERTYPE_GOOSE,
    MAX_FRAME,
    S_BIT,
    GooseHeader,
    UnknownField,
    Vlan,
    is_goose,
    parse_header,
)
from goosectl.protocols.goose.jsonform import (
    all_data_from_json,
    all_data_to_json,
    frame_to_json,
    from_json,
    to_json,
)
from goosectl.protocols.goose.template import FrameTemplate
from goosectl.protocols.goose.utctime import UtcTime, time_quality

__all__ = [
    "ETHERTYPE_GOOSE",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_FRAME",
    "S_BIT",
    "Array",
    "BadLength",
    "BadTag",
    "BadValue",
    "Bcd",
    "BinaryTime",
    "BitString",
    "Boolean",
    "BooleanArray",
    "Data",
    "Dbpos",
    "FloatingPoint",
    "FrameTemplate",
    "GooseError",
    "GooseFrame",
    "GooseHeader",
    "Integer",
    "MmsString",
    "ObjId",
    "OctetString",
    "Quality",
    "Real",
    "Structure",
    "Truncated",
    "TypeMismatch",
    "UnknownField",
    "Unsigned",
    "UtcTime",
    "VisibleString",
    "Vlan",
    "all_data_from_json",
    "all_data_to_json",
    "data_shape",
    "decode_all_data",
    "decode_data",
    "decode_frame",
    "encode_all_data",
    "encode_data",
    "encode_frame",
    "frame_to_json",
    "from_json",
    "is_goose",
    "mac",
    "mac_str",
    "parse_header",
    "time_quality",
    "to_json",
]
