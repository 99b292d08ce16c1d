"""The methods a request may name: shipped ones, by name or alias, never a spec file path."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unirag.methods.spec import builtin_methods
from unirag.server.errors import ApiError

if TYPE_CHECKING:
    from unirag.methods.spec import MethodSpec


class MethodCatalog:
    """Shipped method specs, parsed once (they do not change while serving)."""

    def __init__(self) -> None:
        self._by_name: dict[str, MethodSpec] = {}

    def resolve(self, name: str) -> MethodSpec:
        """The spec named ``name`` (case-insensitive name or alias); a 404 naming the known ones."""
        if not self._by_name:
            for spec in builtin_methods().values():
                self._by_name.update({alias.lower(): spec for alias in spec.aliases})
                self._by_name[spec.name.lower()] = spec
        found = self._by_name.get(name.strip().lower())
        if found is None:
            known = ", ".join(sorted({spec.name for spec in self._by_name.values()}))
            raise ApiError(404, f"unknown method '{name}' (known: {known})", "not_found", "model_not_found")
        return found
