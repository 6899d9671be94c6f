"""The command line under signals: Ctrl-C (one line, exit 130, at once) and a closed pipe (no traceback).

Every case runs the command in a subprocess, as a user would: ``python -m
ctmc`` and ``python -m ctmc.cli`` call :func:`ctmc.cli.main` without
arguments, as the ``ctmc`` script does.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from ctmc.cli import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, INTERRUPTED_MESSAGE

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

#: a 53^3-state lattice walk whose sparse LU (SuperLU, ``--method lu``) takes about 50 s on the
#: development machine (52 s measured, 2.2 GB at its peak) and is killed after a few seconds here
CUBE = """
    import ctmc
    N = 52
    model = ctmc.Model("cube")
    x, y, z = model.var("x", 0, N), model.var("y", 0, N), model.var("z", 0, N)
    for v, r in ((x, 1.0), (y, 1.3), (z, 1.7)):
        model.event(f"up {v}", guard=v < N, rate=r, update={v: v + 1})
        model.event(f"down {v}", guard=v > 0, rate=2.0, update={v: v - 1})
    initial = {"x": 0, "y": 0, "z": 0}
"""
#: M/M/1/K with K = 20000: its csv table (about 500 kB) is far beyond a pipe's buffer (64 kB)
MM1K = """
    import ctmc
    K = 20000
    model = ctmc.Model("mm1k")
    n = model.var("n", 0, K)
    model.event("arrive", guard=n < K, rate=1.0, update={n: n + 1})
    model.event("depart", guard=n > 0, rate=2.0, update={n: n - 1})
    initial = {"n": 0}
"""


def _model_file(tmp_path, name, src):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src))
    return path


def _default_sigint():
    # a test run as a background job of a script starts with SIGINT ignored; the command keeps
    # an ignored SIGINT ignored (as Python does), so give the child the default disposition
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _popen(args, **env):
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(ROOT), env=dict(os.environ, **env), preexec_fn=_default_sigint)


def test_ctrl_c_during_a_sparse_factorisation_ends_the_command_at_once(tmp_path):
    """SIGINT while SuperLU factorises: exit 130, one line, no traceback, no result.

    The progress line (``CTMC_PROGRESS=1``, drawn after 2 s of the factorisation) says
    when SuperLU is running; SIGINT is sent then. Python's own handler would run only
    when the factorisation returns, about 50 s later (and print a traceback); the
    compiled handler ends the process in milliseconds. The 10 s bound is not a speed
    requirement but a fifth of the factorisation, generous for a loaded machine: a
    process still alive then is waiting for SuperLU. No result on standard output is
    the evidence, independent of time, that the solve never finished.
    """
    path = _model_file(tmp_path, "cube", CUBE)
    proc = _popen(["-m", "ctmc.cli", "solve", str(path), "--method", "lu"], CTMC_PROGRESS="1")
    err, started = bytearray(), threading.Event()

    def read_stderr():
        for chunk in iter(lambda: proc.stderr.read1(4096), b""):
            err.extend(chunk)
            if b"factorising" in err:
                started.set()
        started.set()                           # ended (or failed) before the factorisation showed
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        started.wait(timeout=300)
        assert proc.poll() is None and b"factorising" in err, f"no factorisation:\n{err.decode()[-2000:]}"
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not end the command within 10 s: it waited for the factorisation")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=30)
    out = proc.stdout.read()
    text = err.decode()
    assert code == EXIT_INTERRUPTED
    assert text.endswith(INTERRUPTED_MESSAGE + "\n") and text.count(INTERRUPTED_MESSAGE) == 1, text[-500:]
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert out == b""                           # no result: it ended inside the solve


def test_the_python_fallback_without_the_compiled_handler(tmp_path):
    """Without ``ctmc._kernels`` the command still ends with one line and 130 (when Python runs)."""
    script = textwrap.dedent("""
        import os, signal, sys
        sys.modules["ctmc._kernels"] = None          # an install without the compiled extension
        from ctmc.cli import arm_interrupt
        print(arm_interrupt(), flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        while True:
            pass
    """)
    proc = _popen(["-c", script])
    out, err = proc.communicate(timeout=120)
    assert out == b"python\n" and proc.returncode == EXIT_INTERRUPTED
    assert err.decode() == INTERRUPTED_MESSAGE + "\n"


@pytest.mark.parametrize("module", ["ctmc", "ctmc.cli"])
def test_a_closed_pipe_ends_the_command_quietly(tmp_path, module):
    """``ctmc solve ... --format csv | head -1``: the first line, then exit 141 and nothing on stderr."""
    path = _model_file(tmp_path, "mm1k", MM1K)
    proc = _popen(["-m", module, "solve", str(path), "--format", "csv"])
    first = proc.stdout.readline()
    proc.stdout.close()                         # what head does after its line
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert first == b"n,probability\n"
    assert "Traceback" not in err and "Error" not in err, err
    assert code == EXIT_BROKEN_PIPE


def test_ctrl_c_is_armed_by_the_command_only(tmp_path):
    """Importing ctmc and its families, or calling ``main(argv)`` from Python, leaves SIGINT alone.

    The probe (the C extension's own view of SIGINT's handler) is checked to see the
    handler once :func:`ctmc.cli.arm_interrupt` installs it, and an ignored SIGINT stays
    ignored.
    """
    path = _model_file(tmp_path, "tiny", MM1K.replace("20000", "3"))
    script = textwrap.dedent(f"""
        import signal
        import ctmc, ctmc.cli, ctmc.solve_cli
        for fam in ctmc.cli.load_families():
            pass
        import ctmc._kernels as k
        seen = [k.sigint_armed(), signal.getsignal(signal.SIGINT) is signal.default_int_handler]
        assert ctmc.cli.main(["solve", {str(path)!r}]) == 0
        seen.append(k.sigint_armed())
        seen.append(ctmc.cli.arm_interrupt())
        seen.append(k.sigint_armed())
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        seen.append(ctmc.cli.arm_interrupt())
        seen.append(signal.getsignal(signal.SIGINT) is signal.SIG_IGN and not k.sigint_armed())
        print(seen)
    """)
    proc = _popen(["-c", script])
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines()[-1] == str([False, True, False, "c", True, "ignored", True])
