"""The HTTP and MCP servers: thin callers of the Python API (:mod:`unirag.api`).

``unirag serve`` runs :func:`unirag.server.app.create_app` under uvicorn;
``unirag mcp`` runs :func:`unirag.server.mcp_tools.build_mcp_server` over stdio.
Nothing is imported here, so ``unirag --help`` never loads FastAPI.
"""
