"""Fault injection on a byte stream, seeded and reproducible, sans-IO.

`FaultyChannel` sits between a writer and a reader and works per frame (bytes up to and
including a 0x00 delimiter), because that is the unit a real line error destroys:

- ``corrupt``: probability that a frame gets one byte changed (XOR with a random non-zero
  value). Any byte may be hit, the delimiter too, so frames also merge and split.
- ``drop``: probability that a frame vanishes.
- ``delay_ms`` / ``jitter_ms``: each frame is delivered after delay +/- jitter (uniform),
  never before an earlier frame (a UART does not reorder).
- ``split``: frames are delivered as 1-3 separate chunks, 0.1 ms apart (partial writes).

All randomness comes from one `random.Random(seed)`: the same seed and the same input
give the same faults, so a failing run can be replayed exactly.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from dataclasses import dataclass

NS_PER_MS = 1_000_000
SPLIT_GAP_NS = 100_000


@dataclass(frozen=True)
class FaultConfig:
    corrupt: float = 0.0
    drop: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    split: bool = False

    def __post_init__(self) -> None:
        for name in ("corrupt", "drop"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"fault rate {name}={v} must be within 0..1")
        for name in ("delay_ms", "jitter_ms"):
            v = getattr(self, name)
            if v < 0:
                raise ValueError(f"fault {name}={v} must be >= 0 ms")
        if self.jitter_ms > self.delay_ms:
            raise ValueError(
                f"jitter_ms={self.jitter_ms} exceeds delay_ms={self.delay_ms}: "
                "a frame cannot arrive before it was sent"
            )

    @property
    def active(self) -> bool:
        return bool(self.corrupt or self.drop or self.delay_ms or self.split)


class FaultyChannel:
    """One direction of the line; `put` what was written, `take_due` what arrives."""

    def __init__(self, config: FaultConfig | None = None, seed: int = 0) -> None:
        self.config = config or FaultConfig()
        self.rng = random.Random(seed)
        self._partial = bytearray()
        self._q: deque[tuple[int, bytes]] = deque()
        self._last_due = 0
        self.counts: Counter[str] = Counter()

    def put(self, data: bytes, now_ns: int) -> None:
        self._partial += data
        while True:
            end = self._partial.find(0)
            if end < 0:
                return
            chunk = bytes(self._partial[: end + 1])
            del self._partial[: end + 1]
            self._frame(chunk, now_ns)

    def _frame(self, chunk: bytes, now_ns: int) -> None:
        c, rng = self.config, self.rng
        self.counts["frames"] += 1
        if c.drop and rng.random() < c.drop:
            self.counts["dropped"] += 1
            return
        if c.corrupt and rng.random() < c.corrupt:
            i = rng.randrange(len(chunk))
            b = bytearray(chunk)
            b[i] ^= rng.randrange(1, 256)
            chunk = bytes(b)
            self.counts["corrupted"] += 1
        due = now_ns
        if c.delay_ms:
            lo, hi = c.delay_ms - c.jitter_ms, c.delay_ms + c.jitter_ms
            due += int(rng.uniform(lo, hi) * NS_PER_MS)
        due = max(due, self._last_due)
        if c.split and len(chunk) > 1:
            cuts = sorted(rng.sample(range(1, len(chunk)), min(len(chunk) - 1, rng.randint(1, 2))))
            bounds = [0, *cuts, len(chunk)]
            for k in range(len(bounds) - 1):
                self._q.append((due + k * SPLIT_GAP_NS, chunk[bounds[k] : bounds[k + 1]]))
            due += (len(bounds) - 2) * SPLIT_GAP_NS
            self.counts["split"] += 1
        else:
            self._q.append((due, chunk))
        self._last_due = due

    def take_chunks(self, now_ns: int) -> list[bytes]:
        """Due chunks, one per write (so a shell can reproduce partial writes)."""
        out = []
        while self._q and self._q[0][0] <= now_ns:
            out.append(self._q.popleft()[1])
        return out

    def take_due(self, now_ns: int) -> bytes:
        return b"".join(self.take_chunks(now_ns))

    def next_due(self) -> int | None:
        return self._q[0][0] if self._q else None

    def clear(self) -> None:
        """Forget bytes in flight (the line was unplugged)."""
        self._q.clear()
        self._partial.clear()
