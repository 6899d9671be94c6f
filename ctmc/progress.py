r"""Progress on the terminal, and ctmc's warnings as one line.

Progress
--------
Every analysis that can run for more than a couple of seconds reports through
one class, :class:`Progress`, drawn by ``tqdm`` on standard error. It prints
nothing before ``delay`` seconds (2 by default), nothing when disabled, and it
erases its line when done. Whether it is enabled is decided, first match wins:

1. the ``progress`` option of the method or the build (``True``/``False``);
2. the same option given to an enclosing analysis (:func:`progress_scope`:
   ``stationary(..., progress=False)`` silences the factorisation and the
   Krylov iterations it runs);
3. :func:`set_progress` (``True``/``False``; ``None`` returns to 4 and 5);
4. the environment variable ``CTMC_PROGRESS`` (``0``: never, ``1``: always);
5. whether standard error is a terminal (so pipes, files and tests stay quiet).

The time left is estimated three ways:

* **counted tasks** (right-hand sides, time points, build chunks): from the
  fraction done, :math:`t_{left} = t\,(N - k)/k`;
* **iterations** (sweeps, cycles, Krylov steps) towards a tolerance
  :math:`\tau`: from the recent fall of :math:`\log r` (over the last
  ``window`` seconds), :math:`t_{left} = (\log r - \log\tau)/\text{rate}`;
  no estimate while the residual does not fall;
* **a call without callbacks** (a sparse LU factorisation): a background
  thread redraws the elapsed time, against an estimate of the work when there
  is one (:meth:`Progress.spin`); the thread is stopped on every exit.

Warnings
--------
ctmc's warnings (subclasses of :class:`CtmcWarning`, and any warning class
defined in ``ctmc`` or ``models``) print as one line, ``ctmc: Category:
message``, without the file name and source line of Python's default format.
They remain ordinary warnings: ``warnings.simplefilter`` and
``pytest.warns`` see them as before; other libraries' warnings are untouched.

Examples
--------
>>> p = Progress("demo", enabled=False, total=10)
>>> for k in range(10):
...     p.update(done=k + 1)
>>> p.close()
>>> format_warning("capacity too small", CtmcWarning, "x.py", 1)
'ctmc: CtmcWarning: capacity too small\n'
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import sys
import threading
import time
import warnings
from typing import Callable, Optional

__all__ = ["Progress", "set_progress", "progress_enabled", "progress_scope", "scoped", "CtmcWarning",
           "format_warning", "is_ctmc_warning"]

# --------------------------------------------------------------------------
# the switch
# --------------------------------------------------------------------------
_GLOBAL: Optional[bool] = None
_SCOPE: contextvars.ContextVar = contextvars.ContextVar("ctmc_progress", default=None)
_OFF = {"0", "false", "no", "off"}
_ON = {"1", "true", "yes", "on"}


def set_progress(enabled: Optional[bool]) -> None:
    """Switch ctmc's progress reports on (``True``) or off (``False``) everywhere.

    ``None`` returns to the default: the environment variable ``CTMC_PROGRESS``
    (``0`` or ``1``), else on exactly when standard error is a terminal. A
    ``progress=`` option given to a method still wins.

    >>> set_progress(False); progress_enabled()
    False
    >>> set_progress(None)
    """
    global _GLOBAL
    if enabled is not None and not isinstance(enabled, bool):
        raise ValueError(f"set_progress: expected True, False or None, got {enabled!r}")
    _GLOBAL = enabled


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):   # closed or replaced streams
        return False


def progress_enabled(explicit: Optional[bool] = None, stream=None) -> bool:
    """Whether a progress report should be drawn (the rule of the module docstring)."""
    if explicit is not None:
        return bool(explicit)
    scoped = _SCOPE.get()
    if scoped is not None:
        return scoped
    if _GLOBAL is not None:
        return _GLOBAL
    env = os.environ.get("CTMC_PROGRESS", "").strip().lower()
    if env in _OFF:
        return False
    if env in _ON:
        return True
    return _isatty(sys.stderr if stream is None else stream)


@contextlib.contextmanager
def progress_scope(enabled: Optional[bool]):
    """Within the block, progress reports without their own setting follow ``enabled`` (None: no change).

    The analyses wrap their work in it with their ``progress`` option, so the
    factorisations and Krylov solves they call obey it.
    """
    if enabled is None:
        yield
        return
    token = _SCOPE.set(bool(enabled))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def scoped(analysis):
    """Decorate an analysis taking ``**options`` so that its ``progress=`` option is a :func:`progress_scope`."""
    @functools.wraps(analysis)
    def run(*args, **kwargs):
        p = kwargs.get("progress")
        with progress_scope(p if isinstance(p, bool) else None):
            return analysis(*args, **kwargs)
    return run


def _fmt_seconds(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


# --------------------------------------------------------------------------
# the one progress class
# --------------------------------------------------------------------------
class Progress:
    """A progress line on standard error for one long task, with an estimate of the time left.

    Parameters
    ----------
    label : str
        What runs (``"stationary (sor)"``); shown as ``[ctmc] <label>``.
    enabled : bool, optional
        True/False force it; None: :func:`progress_enabled`.
    total : int, optional
        Number of units of a counted task (see :meth:`update`).
    delay : float
        Seconds before anything is drawn: short tasks stay silent.
    every : float
        Least seconds between two redraws.
    clock : callable
        Seconds as a float (``time.perf_counter``); tests pass a fake clock.
    file : file-like, optional
        Where to draw (standard error).
    window : float
        Seconds of residual history that the rate of :meth:`residual` is taken over.

    Examples
    --------
    A counted task, with a fake clock (one unit per second):

    >>> import io
    >>> now = [0.0]
    >>> out = io.StringIO()
    >>> p = Progress("solves", enabled=True, total=4, clock=lambda: now[0], file=out)
    >>> for k in range(4):
    ...     now[0] += 1.0
    ...     p.update(done=k + 1)
    ...     print(p.eta)
    3.0
    2.0
    1.0
    0.0
    >>> p.close()
    """

    def __init__(self, label: str, enabled: Optional[bool] = None, delay: float = 2.0, every: float = 0.2, *,
                 total: Optional[int] = None, clock: Callable[[], float] = time.perf_counter, file=None,
                 window: float = 10.0):
        self.file = sys.stderr if file is None else file
        self.label, self.total, self.delay, self.every, self.window = label, total, delay, every, window
        self.enabled = progress_enabled(enabled, self.file)
        self.clock = clock
        self.t0 = clock()
        self.text = ""
        self.fraction: Optional[float] = None
        self.eta: Optional[float] = None
        self._history: list = []      # (time, log residual) of :meth:`residual`
        self._first: Optional[float] = None     # the first log residual
        self._last_draw = -math.inf
        self._bar = None
        self._lock = threading.Lock()
        self._closed = False

    # ---- what the caller reports ------------------------------------------------
    @property
    def elapsed(self) -> float:
        return self.clock() - self.t0

    def update(self, text: str = "", *, done: Optional[float] = None, total: Optional[float] = None):
        """Report ``text`` and, for a counted task, ``done`` units out of ``total`` (or the constructor's).

        The time left is ``elapsed * (total - done) / done``.
        """
        if not self.enabled:
            return
        if total is not None:
            self.total = total
        now = self.clock()
        if done is not None and self.total:
            self.fraction = min(max(done / self.total, 0.0), 1.0)
            t = now - self.t0
            self.eta = t * (1 - self.fraction) / self.fraction if self.fraction > 0 else None
            text = text or f"{done:g}/{self.total:g}"
        self.text = text
        self._maybe_draw(now)

    def residual(self, rel: float, tol: float, text: str = "", name: str = "residual"):
        """Report an iteration's residual ``rel`` falling towards ``tol``.

        The time left is the decades still to go, ``log(rel / tol)``, over the
        rate at which ``log(rel)`` fell in the last ``window`` seconds (None
        while it does not fall). ``name`` is what ``rel`` is called on the line.
        """
        if not self.enabled:
            return
        now = self.clock()
        if rel > 0 and math.isfinite(rel) and tol > 0:
            lr = math.log(rel)
            h = self._history
            h.append((now, lr))
            while len(h) > 2 and h[1][0] <= now - self.window:
                h.pop(0)
            t_old, l_old = h[0]
            if self._first is None:
                self._first = lr
            first = self._first
            span = first - math.log(tol)
            self.fraction = min(max((first - lr) / span, 0.0), 1.0) if span > 0 else None
            rate = (l_old - lr) / (now - t_old) if now > t_old else 0.0
            self.eta = max(lr - math.log(tol), 0.0) / rate if rate > 0 else None
        what = f"{name} {rel:.1e} (tol {tol:.0e})"
        self.text = f"{text}, {what}" if text else what
        self._maybe_draw(now)

    @contextlib.contextmanager
    def spin(self, text: str = "", estimate: Optional[float] = None):
        """Redraw the elapsed time from a background thread while the block runs.

        For calls that report nothing (a sparse LU factorisation). ``estimate``
        (seconds) gives a time left of ``estimate - elapsed``. The thread is
        stopped and joined on every exit, exceptions included; it never starts
        when the report is disabled.
        """
        if not self.enabled:
            yield self
            return
        stop = threading.Event()
        start = self.clock()

        def tick():
            while not stop.wait(self.every):
                spent = self.clock() - start
                if estimate:
                    self.fraction = min(spent / estimate, 0.99)
                    self.eta = estimate - spent if spent < estimate else None
                self.text = text + ("" if estimate is None or spent < estimate else ", longer than estimated")
                self._maybe_draw(self.clock())

        self.text = text
        thread = threading.Thread(target=tick, name=f"ctmc progress: {self.label}", daemon=True)
        self.thread = thread
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def close(self, text: str = "done"):
        """Erase the line (if one was drawn); later calls do nothing."""
        with self._lock:
            self._closed = True
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- drawing ---------------------------------------------------------------------
    def line(self) -> str:
        """The text after the bar: what runs, the elapsed time and the time left."""
        parts = [self.text] if self.text else []
        parts.append(_fmt_seconds(self.elapsed))
        if self.eta is not None:
            parts.append(f"about {_fmt_seconds(self.eta)} left")
        return ", ".join(parts)

    def _maybe_draw(self, now: float):
        if not self.enabled or self._closed or now - self.t0 < self.delay or now - self._last_draw < self.every:
            return
        with self._lock:
            if self._closed:
                return
            self._last_draw = now
            fmt = "{desc}: {line}" if self.fraction is None else "{desc}: {percentage:3.0f}%|{bar}| {line}"
            n = 0 if self.fraction is None else int(1000 * self.fraction)
            if self._bar is None:
                # a pseudo-terminal without a size (0 columns, 0 rows): tqdm would draw nothing
                width = dict(dynamic_ncols=True) if _columns(self.file) > 0 else dict(ncols=100, nrows=50)
                self._bar = _bar_class()(total=1000, initial=n, line=self.line(), bar_format=fmt, file=self.file,
                                         leave=False, desc=f"[ctmc] {self.label}", mininterval=0, delay=0, **width)
            else:
                bar = self._bar
                bar.bar_format, bar.n, bar.line = fmt, n, self.line()
                bar.refresh()


_BAR = None


def _columns(stream) -> int:
    """Width of the terminal behind ``stream`` (0 when unknown: a pseudo-terminal without a size)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 0


def _bar_class():
    """tqdm's bar with ctmc's text after it (the ``{line}`` field of its format); tqdm imported on first use."""
    global _BAR
    if _BAR is None:
        from tqdm import tqdm

        class _Bar(tqdm):
            def __init__(self, *args, line: str = "", **kwargs):
                self.line = line
                super().__init__(*args, **kwargs)

            @property
            def format_dict(self):
                d = super().format_dict
                d["line"] = self.line
                return d
        _BAR = _Bar
    return _BAR


# --------------------------------------------------------------------------
# warnings as one line
# --------------------------------------------------------------------------
class CtmcWarning(Warning):
    """Base class of ctmc's warnings, printed as one line (``ctmc: Category: message``)."""


def is_ctmc_warning(category) -> bool:
    """Whether ``category`` is one of ctmc's warning classes (a :class:`CtmcWarning`, or defined in
    ``ctmc`` or ``models``)."""
    if not isinstance(category, type):
        return False
    if issubclass(category, CtmcWarning):
        return True
    return category.__module__.split(".")[0] in ("ctmc", "models")


def format_warning(message, category, filename, lineno, line=None) -> str:
    """``ctmc: Category: message`` for ctmc's warnings; Python's usual format for the others."""
    if is_ctmc_warning(category):
        return f"ctmc: {category.__name__}: {message}\n"
    return _previous_format(message, category, filename, lineno, line)


_previous_format = warnings.formatwarning


def _install():
    """Route :func:`warnings.formatwarning` through :func:`format_warning` (once)."""
    global _previous_format
    if getattr(warnings.formatwarning, "_ctmc", False):
        return
    _previous_format = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        return format_warning(message, category, filename, lineno, line)
    formatwarning._ctmc = True
    warnings.formatwarning = formatwarning


_install()
