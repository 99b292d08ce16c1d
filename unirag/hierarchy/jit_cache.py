"""numba's on-disk cache for umap-learn's kernels.

umap-learn compiles about a hundred numba functions on first use and asks numba
to cache none of them, so every process that runs UMAP (the RAPTOR tree, LeanRAG
with ``reducer="umap"``) paid seconds of compilation before its first
reduction, far more than the reduction itself. numba can cache a function compiled without
``cache=True`` as well: :meth:`Dispatcher.enable_caching` is what that flag
calls. numba then writes the machine code next to umap's sources (its
``__pycache__``) or, where that is read-only, in its per-user cache directory;
``NUMBA_CACHE_DIR`` moves it, as for any numba cache. A cached kernel is
recompiled when umap's source file or the numba version changes (numba checks
both).

Nothing happens at import: the cache is switched on when UMAP is first asked for.
"""

from __future__ import annotations

import importlib
from types import ModuleType

UMAP_MODULES = ("umap.umap_", "umap.layouts", "umap.utils", "umap.distances", "umap.sparse", "umap.spectral")


def cached_umap() -> ModuleType:
    """The ``umap`` module, its module-level numba kernels set to use numba's on-disk cache."""
    import umap
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    for name in UMAP_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            # NullCache: numba's "no cache" (cache=False); a cached dispatcher is left as it is.
            if isinstance(value, CPUDispatcher) and isinstance(getattr(value, "_cache", None), NullCache):
                value.enable_caching()
    return umap
