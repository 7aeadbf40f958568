"""What a person reads after a run: timelines, anomalies, latency histograms and percentiles,
the LGOS view of every subscription. Formatting only: no sockets, no clock.

May import: `controller.engine`, `controller.goose`, `controller.link`, `controller.logic`,
`controller.agent` (their effect types), `controller.display`. Imported by
`controller.shell`, `controller.demo`, `controller.commands`, `lab`.
"""
