"""goosectl: the deterministic core (engine, GOOSE machines, logic, agent) and its shell."""
