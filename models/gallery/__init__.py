"""The standard CTMC benchmark gallery: PRISM's ``prism-examples/ctmcs`` models on ctmc.

Seven models that papers and tools (PRISM, Storm, the Quantitative Verification
Benchmark Set, QComp) use to compare CTMC solvers, each written with
:class:`ctmc.Model` from the facts of its published description (variables,
ranges, guards, rates, synchronisation, rewards, labels), with its published
measure (five stationary, one hitting-time reward, one transient probability):

========  =====  ==========================================  ===============================
name      size   source                                       measure (PRISM property)
========  =====  ==========================================  ===============================
kanban    t      Ciardo & Tilgner 1996                        ``R{"throughput"}=? [S]``
fms       n      Ciardo & Trivedi 1993                        ``R{"productivity"}=? [S]``
polling   N      Ibe & Trivedi 1990                           ``S=? [ s1=1 & !(s=1 & a=1) ]``
cluster   N      Haverkort, Hermanns & Katoen 2000            ``S=? ["premium"]``
tandem    c      Hermanns, Meyer-Kayser & Siegle 1999         ``R{"customers"}=? [S]``
========  =====  ==========================================  ===============================

``GALLERY[name](size)`` returns a :class:`~ctmc.models.gallery._base.GalleryModel`:
``.model()`` (the :class:`ctmc.Model`), ``.initial``, ``.chain()``,
``.solve()`` (the measure's analysis: ``.analysis`` says which) and ``.measure(result)``, ``.prism_program()`` / ``.prism_property`` /
``.prism_constants`` (an equivalent PRISM program, for Storm).

>>> from ctmc.models.gallery import GALLERY
>>> chain = GALLERY["tandem"](3).chain()
>>> chain.n_states, chain.n_transitions
(28, 71)
"""
from ._base import GalleryModel
from .cluster import cluster
from .embedded import embedded
from .fms import fms
from .kanban import kanban
from .peer2peer import peer2peer
from .polling import polling
from .tandem import tandem

__all__ = ["GALLERY", "GalleryModel", "kanban", "fms", "polling", "cluster", "tandem", "embedded", "peer2peer",
           "parse_spec"]

#: name -> constructor taking the size parameter
GALLERY = {"kanban": kanban, "fms": fms, "polling": polling, "cluster": cluster, "tandem": tandem,
           "embedded": embedded, "peer2peer": peer2peer}


def parse_spec(spec: str) -> GalleryModel:
    """A gallery model from ``"name:size"`` (e.g. ``"kanban:3"``)."""
    name, _, size = spec.partition(":")
    if name not in GALLERY or not size.strip().isdigit():
        raise ValueError(f"model spec: expected name:size with name in {sorted(GALLERY)}, got {spec!r}")
    return GALLERY[name](int(size))
