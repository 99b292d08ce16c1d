"""Serve a workspace's MCP tools over stdio on the scripted model (what ``unirag mcp`` does
with the configured models): ``python tests/mcp_launcher.py WORKSPACE [FILES_ROOT]``.
Used by test_server.py and test_mcp_corpus.py."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the fakes, and this checkout's unirag

from fakes import HashEmbedder, ScriptedChat  # noqa: E402

from unirag import UniRAG  # noqa: E402
from unirag.server.mcp_tools import serve_stdio  # noqa: E402

if __name__ == "__main__":
    files_root = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    with UniRAG(sys.argv[1], create=False, chat_backend=ScriptedChat(), embedding_backend=HashEmbedder(),
                stale_while_writing=True) as rag:
        serve_stdio(rag, files_root=files_root)
