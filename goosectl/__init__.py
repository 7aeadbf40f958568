"""goosectl, the one import name: `goosectl.controller`, `goosectl.protocols`,
`goosectl.firmware_sim` and `goosectl.lab` are the repository's top-level folders of the same
names (linked here, so the checkout, mypy and the wheel all see one layout)."""

from goosectl.controller import __version__

__all__ = ["__version__"]
