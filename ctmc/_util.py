"""Small internal helpers: memory limits, timing, masks."""
from __future__ import annotations

import contextlib
import os
import time

import numpy as np

from .results import StateSpaceTooLarge


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # pragma: no cover - non-Linux
        pass
    try:  # pragma: no cover
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 8 << 30


def _address_space_left():
    """Bytes the process may still map under ``ulimit -v`` (None: unlimited)."""
    try:
        import resource
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # pragma: no cover
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover
        used = 0
    return max(0, soft - used)


def _cgroup_dirs():
    """``(version, directory)`` of this process's memory cgroup and its ancestors, leaf first."""
    try:
        with open("/proc/self/cgroup") as fh:
            lines = fh.read().splitlines()
    except OSError:  # pragma: no cover - non-Linux
        return []
    out = []
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        if ctrl == "memory":
            base, version = "/sys/fs/cgroup/memory", 1
        elif ctrl == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            base, version = "/sys/fs/cgroup", 2
        else:
            continue
        parts = [q for q in path.split("/") if q]
        for i in range(len(parts), -1, -1):
            d = os.path.join(base, *parts[:i])
            if os.path.isdir(d):
                out.append((version, d))
    return out


def _read(path):
    with open(path) as fh:
        return fh.read().strip()


def _cgroup_left():
    """Bytes left under the tightest memory limit of this process's cgroup and its ancestors
    (v2 or v1; reclaimable inactive file cache counts as free); None where there is none."""
    names = {2: ("memory.max", "memory.current", "inactive_file"),
             1: ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")}
    best = None
    for version, d in _cgroup_dirs():
        limit_f, usage_f, inactive_key = names[version]
        try:
            text = _read(os.path.join(d, limit_f))
            if text == "max" or int(text) >= 1 << 60:
                continue
            used = int(_read(os.path.join(d, usage_f)))
            for line in _read(os.path.join(d, "memory.stat")).splitlines():
                key, _, value = line.partition(" ")
                if key == inactive_key:
                    used -= int(value)
            left = max(0, int(text) - used)
        except (OSError, ValueError):
            continue
        best = left if best is None else min(best, left)
    return best


def cores() -> int:
    """The cores this process may run on (its CPU affinity; the CPU count off Linux)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def amax(a) -> float:
    """``||a||_inf`` (0 for none; ``nan`` if ``a`` holds one), for a float array without a temporary array.

    >>> amax(np.array([1.0, -3.0, 2.0])), amax(np.zeros(0))
    (3.0, 0.0)
    """
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return float(np.abs(a).max(initial=0.0))
    return float(np.maximum(a.max(initial=0.0), -a.min(initial=0.0))) + 0.0     # (+ 0.0: not -0.0)


def block_size(n: int, most: int) -> int:
    """Entries of ``n`` taken at a time by a loop that holds a block's temporaries, not a vector's: ``most``,
    at most a sixteenth of them, not fewer than 4096 (so a block stays a small share of a small vector too).

    >>> block_size(10**7, 1 << 16), block_size(32_640, 1 << 16), block_size(1000, 1 << 16)
    (65536, 4096, 4096)
    """
    return min(int(most), max(4096, int(n) // 16))


def blocks(n: int, most: int):
    """Slices of ``range(n)``, :func:`block_size` entries at a time.

    >>> [(s.start, s.stop) for s in blocks(10_000, 1 << 16)]
    [(0, 4096), (4096, 8192), (8192, 10000)]
    """
    step = block_size(n, most)
    return (slice(s, min(s + step, int(n))) for s in range(0, int(n), step))


_TRIM = []


def trim_heap() -> None:
    """Give the allocator's free pages back to the system (glibc's ``malloc_trim(0)``; nothing where the C
    library has none). A large temporary freed in the middle of the heap (the arrays of a search below
    glibc's mmap threshold) stays resident until its pages are reused; the resident set is what the machine
    sees, so a solve calls this where such temporaries end, before a stage that allocates many vectors."""
    if not _TRIM:
        try:
            import ctypes
            import ctypes.util
            _TRIM.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _TRIM.append(None)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def available_memory() -> int:
    """Bytes available to new allocations: the least of ``MemAvailable``, the room left under
    the process's address-space limit (``ulimit -v``) and under its cgroup's memory limit."""
    return min(v for v in (_meminfo_available(), _address_space_left(), _cgroup_left()) if v is not None)


def as_points(x, name: str) -> np.ndarray:
    """A number or 1-D array of real numbers >= 0 (times, transform arguments) as a float array.

    >>> as_points(0.5, "t").tolist()
    [0.5]
    >>> as_points([], "t")
    Traceback (most recent call last):
    ...
    ValueError: t: no values given (expected a number or a non-empty 1-D array of numbers >= 0)
    """
    raw = np.atleast_1d(np.asarray(x))
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{name}: expected real numbers >= 0, got {x!r} (complex and other values are "
                         "not supported)")
    a = raw.astype(float)
    if a.size == 0:
        raise ValueError(f"{name}: no values given (expected a number or a non-empty 1-D array of numbers >= 0)")
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a number or a 1-D array of numbers, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ValueError(f"{name}: values must be finite and >= 0, got {a[~(np.isfinite(a) & (a >= 0))][:3]}")
    return a


@contextlib.contextmanager
def address_space_cap(extra: int):
    """Within the block, the process may map at most ``extra`` more bytes (``RLIMIT_AS``).

    For a native library that allocates as it goes (SuperLU): past the cap
    its ``malloc`` fails and it reports the failure, where the kernel would
    otherwise kill the process. The soft limit is restored on exit; a lower
    limit already in force is kept. Where limits cannot be set, nothing.
    """
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):  # pragma: no cover
        yield
        return
    cap = used + int(extra)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def memory_limit(max_memory) -> int:
    """Resolve a user's ``max_memory`` (bytes, or None for 80 % of free memory)."""
    if max_memory is None:
        return int(0.8 * available_memory())
    if isinstance(max_memory, bool) or not isinstance(max_memory, (int, float, np.integer, np.floating)) \
            or not max_memory > 0:
        raise ValueError(f"max_memory: expected a positive number of bytes or None, got {max_memory!r}")
    return int(max_memory)


def check_memory(estimate: float, limit: int, what: str):
    """Raise :class:`StateSpaceTooLarge` if ``estimate`` bytes exceed ``limit``."""
    if estimate > limit:
        raise StateSpaceTooLarge(
            f"{what} needs about {estimate / 2**30:.2f} GiB but only "
            f"{limit / 2**30:.2f} GiB are allowed (max_memory); reduce the model "
            "or raise max_memory")


class Timer:
    """Context manager measuring wall time in ``.elapsed``."""

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.elapsed = 0.0
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.t0
        return False

    @property
    def now(self) -> float:
        return time.perf_counter() - self.t0
