"""The examples/ scripts run as a user would run them, with the scripted model injected.

Each example exposes ``main(rag)``; here the UniRAG behind it is built on the
scripted chat and the hash embedder (tests/fakes.py), so the examples stay
what a user copies (models from the environment) and still run offline.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

from fakes import HashEmbedder, ScriptedChat

from unirag import UniRAG

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scripted_rag(root: Path) -> UniRAG:
    return UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=HashEmbedder())


def test_quickstart(tmp_path: Path, capsys: object) -> None:
    with scripted_rag(tmp_path / "ws") as rag:
        answer = load_example("quickstart").main(rag)
        assert answer in {"raptor", "graphrag", "hipporag"}  # the scripted model names the first source
        assert len(rag.documents()) == 3
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "3 new documents" in out and "Answer:" in out


def test_async_stream(tmp_path: Path, capsys: object) -> None:
    example = load_example("async_stream")

    async def run() -> list[object]:
        async with scripted_rag(tmp_path / "ws") as rag:
            return await example.main(rag)

    results = asyncio.run(run())
    assert len(results) == 2 and all(result.context for result in results)
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert out.count("Q: ") == 2 and "pieces" in out
