"""The lab: test peers and measuring harnesses, shipped for the `--live` commands.

Nothing the controller runs imports it (docs/decisions/lab-is-shipped.md).

Network namespaces and veth pairs that tests create and always remove (`netns`), the
libiec61850 peer and ping-pong reference (`iec61850_*`, which must share no code with the
product: they are its oracles), the raw-socket and pty floors (`floors`, `wire_floor`) and
the latency harnesses (`latency` in process, `wire_latency` on the wire).

Loaded explicitly by tests, benchmarks and `goosectl demo --live` / `bench --live`; nothing
in `controller`, `protocols` or `firmware_sim` imports it at module level.
"""
