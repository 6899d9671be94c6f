r"""Models written in the PRISM language.

:func:`load` reads a PRISM program of type ``ctmc`` and returns a
:class:`~ctmc.prism.model.PrismModel`, a :class:`ctmc.Model` whose
:meth:`~ctmc.prism.model.PrismModel.build` starts from the program's
initial state(s):

>>> import ctmc.prism
>>> m = ctmc.prism.load('''
... ctmc
... const int K;
... module queue
...     n : [0..K] init 0;
...     [] n < K -> 0.5 : (n'=n+1);
...     [] n > 0 -> 1.0 : (n'=n-1);
... endmodule
... rewards "size" true : n; endrewards
... ''', constants={"K": 10})
>>> chain = m.build()
>>> float(chain.stationary().pi[chain.index(n=10)] / chain.stationary().pi[0])  # 0.5 ** 10
0.0009765625

The parser (:mod:`ctmc.prism.parser`) is a hand-written recursive descent
over the grammar of the PRISM manual; the translation
(:mod:`ctmc.prism.translate`) gives PRISM's CTMC semantics (synchronised
actions multiply rates, conjoin guards and join updates). Errors are
:class:`~ctmc.prism.syntax.PrismError` (a :class:`ctmc.ModelError`) naming
``file:line:column``. :func:`check` answers a CSL property in PRISM's syntax
(``P=? [F<=t phi]``, ``S=? [phi]``, ``R{"r"}=? [C<=t]``, ``T=? [F phi]``,
``filter(...)``...) with the evidence of the analysis behind it, and
:func:`check_file` a properties file (:mod:`ctmc.prism.properties`).
"""
from __future__ import annotations

from .model import PrismModel
from .parser import parse
from .properties import PropertyResult, check, check_file
from .syntax import PrismError, read_source
from .translate import translate

__all__ = ["load", "check", "check_file", "parse", "PrismModel", "PrismError", "PropertyResult"]

_SUFFIXES = (".sm", ".prism", ".pm", ".nm", ".smg")


def load(path_or_text, constants=None) -> PrismModel:
    """Read a PRISM CTMC program.

    Parameters
    ----------
    path_or_text : str or os.PathLike
        A file name (a :class:`~pathlib.Path`, or a one-line string naming an
        existing file or ending in ``.sm``/``.prism``/``.pm``), or the
        program's text.
    constants : dict, optional
        Values of the program's undefined constants, ``{"N": 3}`` (a string
        such as ``"3"`` is read as the constant's type).

    Returns
    -------
    PrismModel
        A :class:`ctmc.Model`; ``build()`` starts from the program's initial
        state(s); its labels and reward structures are the chain's.

    Raises
    ------
    PrismError
        For a syntax or type error, an undefined constant, or a PRISM feature
        not supported (named), with ``file:line:column``.
    FileNotFoundError
        For a file name that does not exist.
    """
    text, file = read_source(path_or_text, "PRISM", "<string>", _SUFFIXES)
    if constants is not None and not hasattr(constants, "items"):
        raise TypeError(f"constants: expected a dict {{name: value}}, got {type(constants).__name__}")
    return translate(parse(text, file), constants)
