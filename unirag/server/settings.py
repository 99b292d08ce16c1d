"""What a server operator chooses: address, key, limits. One object, passed to ``create_app``."""

from __future__ import annotations

from dataclasses import dataclass

from unirag.errors import ConfigError
from unirag.server.guard import is_loopback

API_KEY_ENV = "UNIRAG_SERVER_API_KEY"


@dataclass(frozen=True)
class ServerSettings:
    """Server knobs (the workspace's own settings stay in its ``unirag.yaml``).

    ``api_key``: when set, every route but ``/health`` wants ``Authorization: Bearer KEY``.
    ``build``: a query may build a missing artifact first (as the CLI does); off, it is a
    409 naming the ``unirag index`` command instead. ``build_paid`` (``--build-paid``): such a
    build may call a paid chat model too; off (the default), a build that would is a 409 with
    its estimate, while free builds (zero-LLM, embedded model) run. ``max_upload_bytes``: the largest
    request body ``POST /documents`` accepts. ``max_page``: the most graph nodes or
    communities one page holds, so no request can ask for a whole large graph.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str | None = None
    build: bool = True
    build_paid: bool = False
    max_upload_bytes: int = 20 * 1024 * 1024
    max_page: int = 1000
    max_hops: int = 3
    max_top_k: int = 100
    allowed_hosts: tuple[str, ...] = ()
    insecure: bool = False

    @property
    def query_build(self) -> bool | None:
        """What a query's ``build`` is: False (never), True (even paid), None (only free builds)."""
        if not self.build:
            return False
        return True if self.build_paid else None

    def check_exposure(self) -> str | None:
        """Refuse to serve a key-less workspace beyond this machine: anyone on the network
        could read it, upload to it and spend its model budget. ``insecure`` lets it through
        (a container port, an authenticating proxy in front); the warning line to print is
        returned then, None otherwise."""
        if self.api_key or is_loopback(self.host):
            return None
        if not self.insecure:
            raise ConfigError(f"refusing to serve on {self.host} without an API key: anyone who reaches it could "
                              f"read, upload and spend; set {API_KEY_ENV} (or pass --insecure to serve it open)")
        return (f"serving on {self.host} with no API key (--insecure): anyone who reaches this address "
                f"can read the workspace, upload to it and spend its model budget")

    def __repr__(self) -> str:
        """Never shows the key (a settings object may end up in a log line)."""
        key = "set" if self.api_key else "none"
        return (f"ServerSettings(host={self.host!r}, port={self.port}, api_key={key}, build={self.build}, "
                f"allowed_hosts={self.allowed_hosts!r}, insecure={self.insecure})")
