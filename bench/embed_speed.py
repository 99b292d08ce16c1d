"""Word pieces per second of the embedded MiniLM on this CPU: float graph vs int8 kernels.

On a built workspace's own texts (4,000 relationship texts and 1,500 chunks drawn with seed 0),
in length order, 512 texts a call, as the pipeline embeds them. Wall seconds use the model's
two threads. Markdown rows to stdout, with the load average before and after.

    .venv/bin/python bench/embed_speed.py WORKSPACE
"""
import random, sys, time, os
from pathlib import Path
from unirag.workspace import Workspace
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy import entity_graph
from unirag.llm.embedded import EmbeddedEmbedder
ws = Workspace.open(Path(sys.argv[1]))
g = GraphStore(ws).shared_graph()
random.seed(0)
rel = random.sample(entity_graph.relationship_texts(g)[1], 4000)
chunks = random.sample([c.indexed_text for c in ws.corpus.iter_chunks()], 1500)
print("load", os.getloadavg())
for int8 in (False, True):
    model = EmbeddedEmbedder(int8_kernels=int8); model.embed(["warm up"])
    for label, texts in (("relationship texts", rel), ("chunks", chunks)):
        texts = sorted(texts, key=len)
        cpu, wall, read = time.process_time(), time.perf_counter(), 0
        for i in range(0, len(texts), 512):
            read += model.embed(texts[i:i + 512]).prompt_tokens
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"| {'int8 kernels' if int8 else 'float graph'} | {label} | {len(texts):,} | {read:,} | {wall:.1f} | {cpu:.1f} | {read / wall:,.0f} | {read / cpu:,.0f} |", flush=True)
print("load", os.getloadavg())
