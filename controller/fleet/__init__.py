"""The fleet: each bay's state and journal leave the machine over MQTT to one central store.

`uplink` runs beside a controller as its own unprivileged process (it reads the journal
read-only and asks the control socket for state; the real-time loop never waits for it);
`collector` subscribes to every bay and keeps the central store (`store`); `topics` is
the one place the topic layout and the payloads are built and read. docs/fleet.md has the
whole picture, docs/fleet/*.schema.json the payloads.
"""
