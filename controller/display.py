"""Text that came off the wire, made safe to print on one line of a terminal or a log.

A GOOSE frame is written by whoever can reach the network: an mMSString may carry a line
feed (forging a whole output line that a person or a script then trusts), a carriage
return, or ESC sequences that repaint the terminal. Every text output (`decode`, `listen`,
`replay`, run reports) passes its lines through `printable`; JSON output needs nothing,
`json.dumps` escapes control characters already.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories never printed raw: controls (C0, DEL, C1), format characters (bidi
#: overrides that reorder what is shown), line/paragraph separators, lone surrogates.
_UNSAFE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def printable(text: str) -> str:
    """`text` with every unsafe character escaped (``\\n``, ``\\x1b``, ``\\u202e``) and
    backslashes doubled, so the escapes cannot be forged either. Plain text is returned
    as is, at the cost of one scan."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape(c) for c in text)


def _escape(c: str) -> str:
    short = _SHORT.get(c)
    if short is not None:
        return short
    if unicodedata.category(c) not in _UNSAFE:
        return c
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
