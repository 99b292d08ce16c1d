"""What a server operator chooses: address, key, limits. One object, passed to ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass

API_KEY_ENV = "UNIRAG_SERVER_API_KEY"


@dataclass(frozen=True)
class ServerSettings:
    """Server knobs (the workspace's own settings stay in its ``unirag.yaml``).

    ``api_key``: when set, every route but ``/health`` wants ``Authorization: Bearer KEY``.
    ``build``: a query may build a missing artifact first (as the CLI does); off, it is a
    409 naming the ``unirag index`` command instead. ``max_upload_bytes``: the largest
    request body ``POST /documents`` accepts. ``max_page``: the most graph nodes or
    communities one page holds, so no request can ask for a whole large graph.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    build: bool = True
    max_upload_bytes: int = 20 * 1024 * 1024
    max_page: int = 1000
    max_hops: int = 3
    max_top_k: int = 100

    def __repr__(self) -> str:
        """Never shows the key (a settings object may end up in a log line)."""
        key = "set" if self.api_key else "none"
        return f"ServerSettings(host={self.host!r}, port={self.port}, api_key={key}, build={self.build})"
