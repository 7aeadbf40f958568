"""One exception family for everything the GOOSE codec rejects.

Callers on the hot path catch a single type (`GooseError`) and still get enough to log a
useful line: what went wrong (`kind`), where in the buffer (`offset`, absolute from the
first byte handed to the codec; None when the input was Python values, not bytes) and
which field (`path`, e.g. ``allData[3].structure[1]``). Paths are assembled while the
error unwinds, so the happy path never pays for building them.
"""

from __future__ import annotations


class GooseError(ValueError):
    """Base of every codec error; a ValueError so generic handlers still see bad input."""

    kind = "error"

    def __init__(self, reason: str, *, offset: int | None = None, path: str = "") -> None:
        self.reason = reason
        self.offset = offset
        self.path = path
        super().__init__(reason)

    def prefix_path(self, segment: str) -> GooseError:
        """Prepend an outer path segment while unwinding (``allData[3]`` + ``structure[1]``)."""
        self.path = f"{segment}.{self.path}" if self.path else segment
        return self

    def __str__(self) -> str:
        where = f" at offset {self.offset}" if self.offset is not None else ""
        field = f" in {self.path}" if self.path else ""
        return f"{self.kind}{where}{field}: {self.reason}"


class Truncated(GooseError):
    """The buffer ends before a header, tag, length or value that it announces."""

    kind = "truncated"


class BadTag(GooseError):
    """A tag that is not allowed here (wrong field, wrong order, constructed vs primitive)."""

    kind = "bad-tag"


class BadLength(GooseError):
    """A length that is malformed (indefinite, too many octets) or wrong for the type."""

    kind = "bad-length"


class BadValue(GooseError):
    """Well-framed bytes whose content is invalid (non-minimal integer, bad padding ...)."""

    kind = "bad-value"


class TypeMismatch(GooseError):
    """A Python value or JSON element of the wrong type, or a data set of the wrong shape."""

    kind = "type-mismatch"
