"""The cyclic garbage collector paused while a load builds many objects at once.

Why: CPython runs a full collection each time the number of tracked objects grows by a
quarter, and each one walks every object alive. A cold ``unirag query`` builds most of
its objects in a few loads (the merged graph's ~75,000 rows and lists, the spaCy model,
artifact id lists), and each of them set off a full collection over everything imported
before it: about 0.05 CPU s apiece, four per graph query on MuSiQue. Those loads make
no reference cycles worth collecting, so the collector is paused while they run and
then left as it was; whatever a load leaves behind is collected on the next normal pass.
A long job of many steps (an index update) instead freezes what each step leaves alive
(:func:`survivors_frozen`), so later steps' collections do not walk it again, and keeps
the C heap it grows (:func:`heap_kept`).
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# glibc's mallopt parameters and the defaults restored afterwards (see mallopt(3))
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536
_KEPT_HEAP = 1024 * 1024 * 1024


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection inside the block (nested blocks keep it paused);
    the collector's previous state afterwards, however the block ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def survivors_frozen() -> Iterator[Callable[[], None]]:
    """Yields ``freeze``: called after each step of a long job, it moves every object alive
    (the merged graph, stores, caches: what later steps keep) out of the cyclic collector's
    reach, so that the full collections of later steps walk only what those steps make.
    Everything frozen goes back to the collector when the block ends, however it ends.

    Why: an index update runs some twenty steps over a heap of millions of objects, and
    CPython's full collections walked all of them again and again (measured on an insert of
    61 passages into 6,058: 6.6 CPU s of 46 in collections, 1.4 with survivors frozen).
    """
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


@contextmanager
def heap_kept() -> Iterator[None]:
    """Inside the block glibc serves every block from its heap (no separate mappings) and keeps
    what is freed there for the next allocation instead of giving it back to the system;
    afterwards its defaults return and what is free is given back (``malloc_trim``).

    Why: an index update loads, copies and drops arrays of 1-200 MB hundreds of times (vector
    files, index graphs, id maps). By default each block past 128 KiB-32 MiB is a fresh mapping,
    unmapped when freed, and the next one faults in freshly zeroed pages: on an insert of 61
    passages into 6,058 the kernel spent ~3 of its ~9 system CPU s zeroing pages (perf). Kept,
    the insert took 2-3 CPU s less, its peak RSS 1,265 -> 1,389 MiB (freed blocks wait for reuse).
    Elsewhere than glibc on Linux this does nothing."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_MAX, 0)
    libc.mallopt(_M_TRIM_THRESHOLD, _KEPT_HEAP)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (its soname; it has ``mallopt`` and ``malloc_trim``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
