"""Timers as data: a heap of deadlines that the shell advances, never a thread or a sleep.

The same `TimerHeap` serves live operation (the shell feeds it monotonic time) and replay
(the shell feeds it capture timestamps). Ties fire in the order the timers were armed, so
a run is reproducible to the byte.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from goosectl.controller.engine.effects import CancelTimer, Effect, StartTimer


@dataclass(frozen=True, slots=True)
class Due:
    deadline_ns: int
    machine: str
    name: str
    event: str
    payload: Any


class TimerHeap:
    """Armed timers keyed by (machine, name); re-arming replaces, cancelling is lazy, and
    moving a timer later (`move`) is lazy too: its heap entry stays at the old deadline and
    re-queues itself at the new one when it comes up, so a deadline pushed back on every
    frame (a GOOSE stream's TAL) costs no heap operation per frame."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, str, str]] = []
        # machine -> timer name -> (deadline, seq, event, payload)
        self._live: dict[str, dict[str, tuple[int, int, str, Any]]] = {}
        self._seq = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._live.values())

    def arm(
        self,
        machine: str,
        name: str,
        deadline_ns: int,
        event: str,
        payload: Any = None,
        seq: int | None = None,
    ) -> None:
        """Arm (or re-arm) a timer; `seq` restores a persisted tie-break order."""
        if seq is None:
            self._seq += 1
            seq = self._seq
        else:
            self._seq = max(self._seq, seq)
        self._live.setdefault(machine, {})[name] = (deadline_ns, seq, event, payload)
        heapq.heappush(self._heap, (deadline_ns, seq, machine, name))

    def armed(self, machine: str) -> list[dict[str, Any]]:
        """The machine's armed timers, JSON-ready, for a checkpoint."""
        return [
            {"name": name, "deadline_ns": d, "seq": seq, "event": ev, "payload": p}
            for name, (d, seq, ev, p) in sorted(self._live.get(machine, {}).items())
        ]

    def move(self, machine: str, name: str, deadline_ns: int, payload: Any = None) -> bool:
        """Give armed timer `name` a new deadline and payload; False if it is not armed.

        Later: only the live record changes (lazy re-arming; the timer keeps its arming
        order among ties). Earlier: it is re-armed, a new heap entry."""
        timers = self._live.get(machine)
        if timers is None:
            return False
        cur = timers.get(name)
        if cur is None:
            return False
        if deadline_ns < cur[0]:
            self.arm(machine, name, deadline_ns, cur[2], payload)
        else:
            timers[name] = (deadline_ns, cur[1], cur[2], payload)
        return True

    def cancel(self, machine: str, name: str) -> None:
        timers = self._live.get(machine)
        if timers is not None:
            timers.pop(name, None)

    def cancel_machine(self, machine: str) -> None:
        self._live.pop(machine, None)

    def apply(self, machine: str, effects: Iterable[Effect], now_ns: int) -> None:
        """Execute the timer effects of a step; other effects are left to the caller."""
        for e in effects:
            if type(e) is StartTimer:
                self.arm(machine, e.name, now_ns + e.after_ns, e.event, e.payload)
            elif type(e) is CancelTimer:
                self.cancel(machine, e.name)

    def any_due(self, now_ns: int) -> bool:
        """Cheap check before `pop_due` (stale entries may make it answer True)."""
        heap = self._heap
        return bool(heap) and heap[0][0] <= now_ns

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ns: int) -> Iterator[Due]:
        """Yield timers with deadline <= now in (deadline, arming order); each fires once.

        Timers armed by the caller while iterating are seen too if they are already due.
        """
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ns:
                return
            deadline, _seq, machine, name = heapq.heappop(self._heap)
            _, _, event, payload = self._live[machine].pop(name)
            yield Due(deadline, machine, name, event, payload)

    def _drop_stale(self) -> None:
        """Pop cancelled and replaced entries off the top; re-queue moved ones."""
        heap, live = self._heap, self._live
        while heap:
            deadline, seq, machine, name = heap[0]
            cur = live.get(machine, {}).get(name)
            if cur is not None and cur[1] == seq:
                if cur[0] == deadline:
                    return
                heapq.heapreplace(heap, (cur[0], seq, machine, name))  # moved later
                continue
            heapq.heappop(heap)


class VirtualClock:
    """Time that moves only when told: tests and replay own it."""

    def __init__(self, start_ns: int = 0) -> None:
        self.now_ns = start_ns

    def advance_to(self, t_ns: int) -> None:
        if t_ns < self.now_ns:
            raise ValueError(f"virtual time cannot go back: {t_ns} < {self.now_ns}")
        self.now_ns = t_ns
