"""The memory tests' measure: the peak of what :mod:`tracemalloc` traces (numpy reports its buffers to it)
while a call runs, shared by the test modules."""
from __future__ import annotations

import tracemalloc


def traced_peak(fn):
    """``(fn(), bytes)``: what ``fn`` returns and the peak of the memory traced while it ran, above what was
    held when it started."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
