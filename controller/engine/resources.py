"""Where the data shipped inside a package is: its tables, procedures, default configs.

Found through `importlib.resources`, so the import system (which knows where it loaded the
package from, whatever the install layout) says where, not the source tree's shape
(`Path(__file__).parents[n]` breaks as soon as a module moves or a package is split).
pyproject's package-data ships these files in the wheel; tests/packaging checks it does.

A `Path`, not a `Traversable`, because every reader needs one: tables and configs are read
with their file name in each error, a procedure folder is watched for hot reload.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def shipped(package: str, *parts: str) -> Path:
    """The file or folder `parts` inside `package` (e.g. ``shipped("controller.logic",
    "tables", "bay.yaml")``). A package imported from a zip has no such path: said, not
    guessed."""
    found = files(package).joinpath(*parts)
    if not isinstance(found, Path):
        raise RuntimeError(
            f"{package} is installed where its data files are not files on disk "
            f"({type(found).__name__}); goosectl needs a regular install (pip install goosectl)"
        )
    return found
