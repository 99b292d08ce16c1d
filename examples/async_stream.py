"""Stream answers from an event loop: two questions at once, each printed as it is generated.

Run: python examples/async_stream.py [WORKSPACE]

Model settings come from the environment, as in quickstart.py. ``astream``
yields ``AnswerDelta`` events (the answer's next text) and then one
``QueryDone`` with the whole result (context, usage, timings); a web server
sends them on as server-sent events. Retrieval runs in a worker thread, the
model call is awaited: the loop stays free for other requests meanwhile.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from unirag import AnswerDelta, QueryDone, QueryResult, UniRAG

CORPUS = Path(__file__).resolve().parent / "sample_corpus"
QUESTIONS = ["What does HippoRAG run over its graph?", "How does GraphRAG answer global questions?"]


async def ask(rag: UniRAG, question: str) -> QueryResult:
    pieces: list[str] = []
    async for event in rag.astream(question):
        if isinstance(event, AnswerDelta):
            pieces.append(event.text)  # a chat UI would show each piece as it arrives
        elif isinstance(event, QueryDone):
            print(f"Q: {question}\nA: {''.join(pieces)}  ({len(pieces)} pieces, "
                  f"{len(event.result.context)} sources)")
            return event.result
    raise RuntimeError("the stream ended without its result")


async def main(rag: UniRAG) -> list[QueryResult]:
    await rag.aindex(CORPUS)
    return list(await asyncio.gather(*(ask(rag, question) for question in QUESTIONS)))


async def run(workspace: str) -> None:
    async with UniRAG(workspace) as rag:
        await main(rag)


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1] if len(sys.argv) > 1 else "quickstart-ws"))
