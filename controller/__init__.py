"""goosectl: the deterministic core (engine, GOOSE machines, logic, agent) and its shell."""

#: The one place the version is written: pyproject.toml reads it (dynamic version), the CLI's
#: --version and every journal's meta (`journal.software`) report it.
__version__ = "0.1.0"
