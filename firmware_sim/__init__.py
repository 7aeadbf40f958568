"""The simulated breaker/IO board: firmware as tables on the goosectl engine."""
