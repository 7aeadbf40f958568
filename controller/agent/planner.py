"""Planning: a request names a procedure; a planner gives back the procedure to run.

`Planner` is the interface (plug another one in: an LLM-backed one, a policy service);
`FolderPlanner`, the default, is deterministic: the procedure files of a folder, reloaded
when a file changes. A new version is used by new sessions only; running sessions keep
the `Procedure` object they started with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from controller.agent.procedure import Procedure, ProcedureError, load_procedure


class Planner(Protocol):
    def plan(self, name: str) -> Procedure:
        """The procedure for `name` (LookupError if there is none)."""
        ...

    def available(self) -> dict[str, str]:
        """name -> version of every procedure that can be planned."""
        ...


class FolderPlanner:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._by_file: dict[Path, tuple[float, int, Procedure | None]] = {}
        self.errors: dict[str, str] = {}
        self.reload()

    def reload(self) -> None:
        """Re-read files whose size or mtime changed; a broken file keeps its last good
        version in service and its findings in `errors`."""
        seen = set()
        for path in sorted(self.folder.glob("*.y*ml")):
            seen.add(path)
            st = path.stat()
            cached = self._by_file.get(path)
            if cached is not None and cached[:2] == (st.st_mtime, st.st_size):
                continue
            try:
                proc = load_procedure(path)
                self.errors.pop(str(path), None)
            except ProcedureError as exc:
                self.errors[str(path)] = str(exc)
                proc = cached[2] if cached else None
            self._by_file[path] = (st.st_mtime, st.st_size, proc)
        for gone in set(self._by_file) - seen:
            del self._by_file[gone]

    def _procedures(self) -> dict[str, Procedure]:
        return {p.name: p for _, _, p in self._by_file.values() if p is not None}

    def plan(self, name: str) -> Procedure:
        self.reload()
        procs = self._procedures()
        if name not in procs:
            known = ", ".join(sorted(procs)) or "none"
            raise LookupError(f"no procedure {name!r} in {self.folder} (known: {known})")
        return procs[name]

    def available(self) -> dict[str, str]:
        self.reload()
        return {n: p.version for n, p in sorted(self._procedures().items())}
