"""Draw the four stages of a graph-RAG method as an SVG (docs/img/stages.svg).

The picture's text lives here, in STAGES, so the figure is made by the project from a
source it keeps; tests/test_docs.py checks that the committed SVG is what this script
writes. Run it after editing STAGES: ``python scripts/stages_svg.py``.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "stages.svg"

#: (title, what it makes, lines of detail) per stage, left to right.
STAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("1 Graph building", "unirag index", ("chunks, one extraction", "KG, TKG, RKG, passage", "graph, hybrid, tree")),
    ("2 Index construction", "built on demand", ("vector indices, BM25,", "TF-IDF, community", "hierarchies, C-HNSW")),
    ("3 Operator configuration", "a method = a YAML spec", ("question conversions,", "operators from one pool,", "repeat rounds")),
    ("4 Retrieval & generation", "unirag query -m NAME", ("context with provenance,", "direct / map-reduce /", "adaptive filtering")),
)
BOX_W, BOX_H, GAP, PAD = 220, 118, 34, 10
FILLS = ("#e8f1fb", "#e9f7ef", "#fdf3e3", "#f4ecfb")


def render() -> str:
    """The SVG text: four boxes joined by arrows, system fonts only (nothing fetched)."""
    width = PAD * 2 + len(STAGES) * BOX_W + (len(STAGES) - 1) * GAP
    height = PAD * 2 + BOX_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" role="img" '
        'aria-label="The four stages of a graph-based RAG method">',
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" orient="auto">'
        '<path d="M0,0 L10,4 L0,8 z" fill="#555"/></marker></defs>',
    ]
    for i, (title, subtitle, lines) in enumerate(STAGES):
        x = PAD + i * (BOX_W + GAP)
        cx = x + BOX_W // 2
        parts.append(f'<rect x="{x}" y="{PAD}" width="{BOX_W}" height="{BOX_H}" rx="10" '
                     f'fill="{FILLS[i % len(FILLS)]}" stroke="#555"/>')
        parts.append(f'<text x="{cx}" y="{PAD + 24}" text-anchor="middle" font-size="14" '
                     f'font-weight="bold">{escape(title)}</text>')
        parts.append(f'<text x="{cx}" y="{PAD + 44}" text-anchor="middle" font-size="12" '
                     f'font-family="monospace" fill="#333">{escape(subtitle)}</text>')
        for j, line in enumerate(lines):
            parts.append(f'<text x="{cx}" y="{PAD + 70 + 16 * j}" text-anchor="middle" '
                         f'font-size="12">{escape(line)}</text>')
        if i:
            y = PAD + BOX_H // 2
            parts.append(f'<line x1="{x - GAP + 2}" y1="{y}" x2="{x - 3}" y2="{y}" stroke="#555" '
                         'stroke-width="2" marker-end="url(#arrow)"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
