"""Progress reports (ctmc.progress) and ctmc's one-line warnings."""
import io
import subprocess
import sys
import threading
import warnings
from types import SimpleNamespace

import pytest

import ctmc
from ctmc import progress as P


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture(autouse=True)
def default_switch(monkeypatch):
    monkeypatch.delenv("CTMC_PROGRESS", raising=False)
    P.set_progress(None)
    yield
    P.set_progress(None)


def test_silent_when_disabled_not_a_tty_or_before_the_delay():
    clock = FakeClock()
    off = io.StringIO()
    p = P.Progress("x", False, delay=0.0, every=0.0, clock=clock, file=off)
    clock.t = 5.0
    p.update("step", done=1, total=2)
    p.residual(1e-3, 1e-10)
    p.close()
    assert off.getvalue() == ""
    pipe = io.StringIO()          # not a terminal: the default is off
    p = P.Progress("x", delay=0.0, every=0.0, clock=clock, file=pipe)
    assert not p.enabled
    p.update("step")
    p.close()
    assert pipe.getvalue() == ""
    tty = Tty()
    p = P.Progress("x", delay=2.0, every=0.0, clock=clock, file=tty)
    assert p.enabled
    clock.t += 1.0
    p.update("early")
    assert tty.getvalue() == ""       # before the delay: nothing
    clock.t += 1.5
    p.update("late")
    assert "[ctmc] x: late" in tty.getvalue()
    p.close()
    assert tty.getvalue().endswith("\r")     # the line is erased when done


def test_time_left_of_an_iteration_falls_with_the_log_residual():
    clock = FakeClock()
    out = io.StringIO()
    p = P.Progress("sor", True, delay=0.0, every=0.0, clock=clock, file=out)
    etas = []
    for k in range(1, 10):       # one decade per second towards 1e-10
        clock.t = float(k)
        p.residual(10.0 ** -k, 1e-10, f"sweep {k}")
        etas.append(p.eta)
    assert etas[0] is None                       # one point: no rate yet
    assert all(a > b for a, b in zip(etas[1:], etas[2:]))
    assert etas[-1] == pytest.approx(1.0) and etas[1] == pytest.approx(8.0)
    assert "about 1.0 s left" in out.getvalue() and "sweep 9" in out.getvalue()
    p.residual(1e-9, 1e-10)                      # no fall: no estimate
    clock.t += 1
    p.residual(1e-9, 1e-10)
    p.close()


def test_time_left_of_a_counted_task():
    clock = FakeClock()
    p = P.Progress("solves", True, total=10, delay=0.0, every=0.0, clock=clock, file=io.StringIO())
    etas = []
    for k in range(1, 11):
        clock.t = 2.0 * k
        p.update(done=k)
        etas.append(p.eta)
    assert etas == pytest.approx([18, 16, 14, 12, 10, 8, 6, 4, 2, 0])
    p.close()


def _spinner_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ctmc progress")]


def test_spinner_thread_stops_after_an_exception():
    out = Tty()
    p = P.Progress("lu", True, delay=0.0, every=0.01, file=out)
    with pytest.raises(ZeroDivisionError):
        with p.spin("factorising", estimate=100.0):
            assert p.thread.is_alive()
            import time
            time.sleep(0.1)
            1 / 0
    p.close()
    assert not p.thread.is_alive() and not _spinner_threads()
    assert "factorising" in out.getvalue() and "left" in out.getvalue()
    quiet = P.Progress("lu", False, every=0.01)
    with quiet.spin("factorising"):
        assert not _spinner_threads()      # disabled: no thread at all


def test_global_switch_env_and_scope(monkeypatch):
    tty, pipe = Tty(), io.StringIO()
    assert P.progress_enabled(None, tty) and not P.progress_enabled(None, pipe)
    P.set_progress(False)
    assert not P.Progress("x", file=tty).enabled
    assert P.Progress("x", True, file=tty).enabled        # a method's own option wins
    P.set_progress(True)
    assert P.Progress("x", file=pipe).enabled
    P.set_progress(None)
    monkeypatch.setenv("CTMC_PROGRESS", "0")
    assert not P.Progress("x", file=tty).enabled
    monkeypatch.setenv("CTMC_PROGRESS", "1")
    assert P.Progress("x", file=pipe).enabled
    with P.progress_scope(False):                         # an analysis' progress=False reaches its solves
        assert not P.Progress("x", file=tty).enabled
    with pytest.raises(ValueError):
        P.set_progress("no")


def test_analysis_option_silences_its_factorisation(monkeypatch):
    seen = []
    real = P.Progress.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        seen.append((self.label, self.enabled))
    monkeypatch.setattr(P.Progress, "__init__", spy)
    P.set_progress(True)
    c = ctmc.CTMC([[-2.0, 2.0, 0.0], [1.0, -2.0, 1.0], [0.0, 1.0, -1.0]])
    c.stationary("lu", progress=False)
    lu = [e for lbl, e in seen if lbl.startswith("sparse LU")]
    assert lu and not any(lu)
    seen.clear()
    c.stationary("lu")
    assert any(e for lbl, e in seen if lbl.startswith("sparse LU"))


def test_ctmc_warnings_are_one_line():
    line = warnings.formatwarning("small probabilities unreliable", ctmc.TailAccuracyWarning, "/x/y.py", 12,
                                  "    source line")
    assert line == "ctmc: TailAccuracyWarning: small probabilities unreliable\n"
    from models.supermarket.model import TruncationWarning
    assert issubclass(TruncationWarning, P.CtmcWarning) and issubclass(TruncationWarning, UserWarning)
    # as a user's script sees them (pytest replaces showwarning in-process): one line each for ctmc's
    code = ("import warnings, ctmc\nfrom models.supermarket.model import TruncationWarning\n"
            "warnings.warn('capacity 3 leaves mass 1e-3', TruncationWarning)\n"
            "warnings.warn('tail noise', ctmc.TailAccuracyWarning)\nwarnings.warn('other', UserWarning)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = r.stderr.splitlines()
    assert lines[:2] == ["ctmc: TruncationWarning: capacity 3 leaves mass 1e-3",
                         "ctmc: TailAccuracyWarning: tail noise"]
    assert lines[2].startswith("<string>:5: UserWarning: other")     # other warnings as before
    with pytest.warns(ctmc.TailAccuracyWarning):
        warnings.warn("tail", ctmc.TailAccuracyWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error", P.CtmcWarning)
        with pytest.raises(TruncationWarning):
            warnings.warn("x", TruncationWarning)


def test_jsq_cli_in_a_pipe_prints_no_progress():
    cmd = [sys.executable, "-m", "ctmc.cli", "jsq", "--K", "30"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and "\r" not in r.stdout and "blocking probability" in r.stdout


def test_cli_runs_show_progress_when_enabled(monkeypatch, capsys):
    """The terminal case, forced: no delay, every update drawn."""
    from models.jsq import cli as jsq_cli
    monkeypatch.setattr(P.Progress.__init__, "__defaults__", (None, 0.0, 0.0))
    P.set_progress(True)
    jsq_cli.run(SimpleNamespace(K=30, rho=0.9, mu2=0.5, idle_rate=None))
    err = capsys.readouterr().err
    assert "[ctmc] " in err and "\r" in err
    for switch in (False, None):     # switched off, and the default on a stderr that is no terminal
        P.set_progress(switch)
        jsq_cli.run(SimpleNamespace(K=30, rho=0.9, mu2=0.5, idle_rate=None))
        assert capsys.readouterr().err == ""
