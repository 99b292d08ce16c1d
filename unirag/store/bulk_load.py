"""The cyclic garbage collector paused while a load builds many objects at once.

Why: CPython runs a full collection each time the number of tracked objects grows by a
quarter, and each one walks every object alive. A cold ``unirag query`` builds most of
its objects in a few loads (the merged graph's ~75,000 rows and lists, the spaCy model,
artifact id lists), and each of them set off a full collection over everything imported
before it: about 0.05 CPU s apiece, four per graph query on MuSiQue. Those loads make
no reference cycles worth collecting, so the collector is paused while they run and
then left as it was; whatever a load leaves behind is collected on the next normal pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


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
