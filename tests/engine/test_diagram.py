import subprocess
from pathlib import Path

from tests.support.peers import require_binary
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "tables" / "breaker.yaml"


def render(fmt: str) -> str:
    return goosectl("table", "render", str(EXAMPLE), "--format", fmt).stdout


def test_mermaid_has_every_transition_and_timer():
    out = render("mermaid")
    assert out.startswith("stateDiagram-v2")
    assert "closed --> opening: trip" in out
    assert "open --> closing: close_cmd [field_eq(field=spring_charged,value=True)]" in out
    assert "after 150.0 ms -> op_timeout" in out
    assert "[*] --> closed" in out


def test_dot_is_valid_graphviz():
    out = render("dot")
    assert '"closing" -> "failed" [label="op_timeout"];' in out
    dot = require_binary("dot", "graphviz")
    subprocess.run([dot, "-Tsvg"], input=out, text=True, check=True, capture_output=True)
