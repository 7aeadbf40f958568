"""Planning: a request names a procedure; a planner gives back the procedure to run.

`Planner` is the interface (plug another one in: an LLM-backed one, a policy service);
`FolderPlanner`, the default, is deterministic: the procedure files of a folder, reloaded
when a file changes. A new version is used by new sessions only; running sessions keep
the `Procedure` object they started with.

The folder is hot-reloaded inside a running controller, so each file is loaded alone and
under the loader's limits (`LoaderLimits`: size, YAML aliases, nesting, expanded nodes): a
hostile or broken file (an anchor bomb, bad UTF-8, a file that vanishes between listing
and reading) is rejected with its reason, counted, and named when someone asks for it;
the other procedures stay in service, and a file that breaks keeps its last good version.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Protocol

from goosectl.controller.agent.procedure import Procedure, ProcedureError, load_procedure
from goosectl.controller.agent.tools import TOOLS, ToolSet
from goosectl.controller.engine.findings import Finding
from goosectl.controller.engine.loader import DEFAULT_LIMITS, LoaderLimits


class Planner(Protocol):
    #: the tools its procedures are checked against (and a restore re-parses them with)
    tools: ToolSet

    def plan(self, name: str) -> Procedure:
        """The procedure for `name` (LookupError if there is none)."""
        ...

    def available(self) -> dict[str, str]:
        """name -> version of every procedure that can be planned."""
        ...


class FolderPlanner:
    def __init__(
        self, folder: str | Path, limits: LoaderLimits = DEFAULT_LIMITS, tools: ToolSet = TOOLS
    ) -> None:
        self.folder = Path(folder)
        self.limits = limits
        self.tools = tools
        self._by_file: dict[Path, tuple[float, int, Procedure | None]] = {}
        #: file -> why its current content was rejected (every finding, one per line)
        self.errors: dict[str, str] = {}
        #: rejected loads by finding code (`limit`, `syntax`, `structure`, `io` ...): each
        #: changed file is loaded once, so a count is one rejected version of one file
        self.rejections: Counter[str] = Counter()
        self.reload()

    def reload(self) -> None:
        """Re-read files whose size or mtime changed; a broken file keeps its last good
        version in service and its findings in `errors`."""
        seen = set()
        for path in sorted(self.folder.glob("*.y*ml")):
            seen.add(path)
            try:
                st = path.stat()
            except OSError:
                continue  # gone between listing and stat: the next reload forgets it
            cached = self._by_file.get(path)
            if cached is not None and cached[:2] == (st.st_mtime, st.st_size):
                continue
            proc = cached[2] if cached else None
            try:
                proc = self._load(path)
                self.errors.pop(str(path), None)
            except ProcedureError as exc:
                self.errors[str(path)] = str(exc)
                self.rejections.update({f.code for f in exc.findings})
            self._by_file[path] = (st.st_mtime, st.st_size, proc)
        for gone in set(self._by_file) - seen:
            del self._by_file[gone]
            self.errors.pop(str(gone), None)

    def _load(self, path: Path) -> Procedure:
        try:
            # inside the running loop: a FIFO or a device named *.yaml is never opened to
            # wait for a writer, it is rejected like any other broken file
            return load_procedure(path, self.limits, self.tools, regular_only=True)
        except RecursionError:
            # the loader bounds nesting; this is the last line so one file can never
            # take the whole folder (and the agent) down with it
            reason = "too deeply nested to load"
            raise ProcedureError([Finding(str(path), None, path.name, reason, "limit")]) from None

    def _procedures(self) -> dict[str, Procedure]:
        return {p.name: p for _, _, p in self._by_file.values() if p is not None}

    def plan(self, name: str) -> Procedure:
        self.reload()
        procs = self._procedures()
        if name not in procs:
            known = ", ".join(sorted(procs)) or "none"
            rejected = "".join(f"\nrejected {err}" for err in self.errors.values())
            raise LookupError(f"no procedure {name!r} in {self.folder} (known: {known}){rejected}")
        return procs[name]

    def available(self) -> dict[str, str]:
        self.reload()
        return {n: p.version for n, p in sorted(self._procedures().items())}
