"""The documentation says only what exists: every backticked path, module and `file:line`
or `file:Name` in the Markdown and in the product's docstrings and comments names a real
file, module or definition, every relative link points at a file, and the README's shell
blocks run.

Conventions this test reads (docs/CONTRIBUTING.md): a ```sh block is run by this test
(in a temporary folder, `$TMP` set to it, the checkout's `goosectl` on PATH), except the
set-up block, which CI runs itself; a ```console block shows a session and is not run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs import reference
from tests.support import sources
from tests.support.peers import REPO

TOP = (
    "controller",
    "protocols",
    "firmware_sim",
    "lab",
    "benchmarks",
    "tests",
    "docs",
    "examples",
    ".ci",
)
PACKAGES = ("controller", "protocols", "firmware_sim", "lab")
_TOPS = "|".join(re.escape(t) for t in TOP)
PATH_RE = re.compile(rf"^(?:{_TOPS})/[\w./*-]*?(?::(?P<line>\d+)|:(?P<name>[A-Za-z_][\w.]*))?$")
MODULE_RE = re.compile(rf"^(?:goosectl\.)?(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+$")
SPAN_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def markdown_files() -> list[Path]:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for pkg in PACKAGES:
        files += sorted((REPO / pkg).rglob("*.md"))
    return files


def prose(text: str) -> str:
    """The text outside fenced code blocks (code shows commands, not references)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def _defines(path: Path, dotted: str) -> bool:
    """Whether the Python file defines `dotted` (a class, function, method or name)."""
    tree = sources.tree(path)
    scope: list[ast.stmt] = tree.body
    for part in dotted.split("."):
        found = None
        for node in scope:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name == part:
                    found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == part for t in targets):
                    found = node
        if found is None:
            return False
        scope = getattr(found, "body", [])
    return True


def check_path(span: str) -> str | None:
    """Why the backticked path is wrong, or None."""
    m = PATH_RE.match(span)
    assert m is not None
    name, line = m.group("name"), m.group("line")
    rel = span.split(":", 1)[0]
    if "*" in rel:
        return None if list(REPO.glob(rel)) else f"{rel}: no file matches"
    path = REPO / rel
    if not path.exists():
        return f"{rel}: no such file or folder"
    if line is not None:
        n = len(path.read_text(encoding="utf-8").splitlines())
        if int(line) > n:
            return f"{rel}: has {n} lines, not {line}"
    if name is not None and path.suffix == ".py" and not _defines(path, name):
        return f"{rel}: defines no {name}"
    return None


def check_module(span: str) -> str | None:
    """Why the backticked dotted name is neither a module nor an attribute of one.

    Prose names the layers by their folders (`controller.engine`); the modules are
    imported under `goosectl.` (never bare: that would load a second copy of each)."""
    parts = ["goosectl", *span.removeprefix("goosectl.").split(".")]
    for cut in range(len(parts), 0, -1):
        mod = ".".join(parts[:cut])
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if mod.endswith("__main__"):  # importing it would run the command line
            return None if cut == len(parts) else f"{span}: attributes of a __main__"
        obj = importlib.import_module(mod)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"{span}: {mod} has no {'.'.join(parts[cut:])}"
            obj = getattr(obj, attr)
        return None
    return f"{span}: no such module"


def check_span(span: str) -> str | None:
    span = span.strip()
    if PATH_RE.match(span):
        return check_path(span)
    if MODULE_RE.match(span):
        return check_module(span)
    return None


def test_every_backticked_reference_in_the_markdown_exists() -> None:
    bad = []
    for md in markdown_files():
        for line in prose(md.read_text(encoding="utf-8")).splitlines():
            for span in SPAN_RE.findall(line):
                why = check_span(span)
                if why:
                    bad.append(f"{md.relative_to(REPO)}: {why}")
    assert not bad, "\n".join(bad)


def test_every_relative_link_in_the_markdown_points_at_a_file() -> None:
    bad = []
    for md in markdown_files():
        for target in LINK_RE.findall(prose(md.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (md.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                bad.append(f"{md.relative_to(REPO)}: link to {target}: no such file")
    assert not bad, "\n".join(bad)


def test_every_backticked_reference_in_docstrings_and_comments_exists() -> None:
    bad = []
    for pkg in PACKAGES:
        for py in sorted((REPO / pkg).rglob("*.py")):
            for n, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
                for span in SPAN_RE.findall(line):
                    why = check_span(span)
                    if why:
                        bad.append(f"{py.relative_to(REPO)}:{n}: {why}")
    assert not bad, "\n".join(bad)


def test_no_issue_numbers_in_the_code() -> None:
    """A reader of the repository cannot look an issue up: say the behaviour instead."""
    bad = []
    for top in (*PACKAGES, "benchmarks", "tests"):
        for py in sorted((REPO / top).rglob("*.py")):
            if py == Path(__file__):
                continue
            for n, line in enumerate(py.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\bissues? #?\d+", line, re.I):
                    bad.append(f"{py.relative_to(REPO)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


def shell_blocks(md: Path) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", md.read_text(encoding="utf-8"), re.S | re.M)


@pytest.mark.parametrize("doc", ["README.md", "docs/getting-started.md"])
def test_the_shell_blocks_run(doc: str, tmp_path: Path) -> None:
    """Every ```sh block but the set-up one runs as written, in a temporary folder."""
    blocks = [b for b in shell_blocks(REPO / doc) if "python3 -m venv .venv" not in b]
    env = dict(os.environ, TMP=str(tmp_path))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for block in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{doc}: block failed:\n{block}\n{done.stderr[-2000:]}"


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_the_reference_pages_are_generated_from_the_code(page: str) -> None:
    committed = (reference.OUT / page).read_text(encoding="utf-8")
    assert committed == reference.PAGES[page](), (
        f"docs/reference/{page} differs from the code: run `python -m tests.docs.reference`"
    )
