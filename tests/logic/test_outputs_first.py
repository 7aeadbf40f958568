"""Outputs before bookkeeping: the bay tells its shell (`BayController.urgent`)
the moment a TRIP is queued for the device and the moment the trip-acknowledged frame is
built, while the frame that caused them is still being handled. The live shell writes and
sends them then; what is left of the input (the trip input storing its new value, the
settle loop, the reports) comes after. On the virtual wire, with the default bay."""

from __future__ import annotations

from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.logic.effects import DeviceCommand
from goosectl.lab.latency import TripBench


def test_trip_and_its_ack_are_announced_before_the_trip_input_stores_its_value():
    bench = TripBench()
    bay = bench.bay
    trip_input = next(r.name for r in bay.inputs.all if r.event == "protection_trip")
    stored = bay.input_machines[trip_input]
    seen: list[tuple[bool, bool, object]] = []

    def urgent() -> None:
        # peek only: the virtual wire takes the TRIP bytes to the breaker afterwards
        tripped = any(type(r) is DeviceCommand and r.command == "trip" for r in bay.reports)
        ack = any(type(f) is SendFrame and f.gocb_ref.endswith("tripack") for f in bay.frames)
        seen.append((tripped, ack, stored.ctx["value"]))

    try:
        bench.sample(1, warmup=0)  # re-close (urgent not yet set), then a trip
        seen.clear()
        bay.urgent = urgent
        bench.sample(1, warmup=0)
    finally:
        bench.close()
    first_trip = next(i for i, (tripped, _, _) in enumerate(seen) if tripped)
    first_ack = next(i for i, (_, ack, _) in enumerate(seen) if ack)
    # the TRIP first, then the ack, each while the trip input still holds False
    assert first_trip <= first_ack
    assert seen[first_trip][2] is False
    assert seen[first_ack][2] is False
    assert stored.ctx["value"] is True  # ... and stores it once the input is handled
    assert bay.bay.state == "open"


def test_without_a_shell_outputs_wait_for_the_input_to_return():
    """Replay and the demo set no `urgent`: nothing is announced, everything is taken
    after the input, as before."""
    bench = TripBench()
    try:
        assert bench.bay.urgent is None
        bench.sample(2, warmup=0)  # raises if a trip does not open the breaker
    finally:
        bench.close()
