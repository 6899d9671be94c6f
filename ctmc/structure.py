r"""Graph structure of a generator: communicating classes and reachability.

The transition graph has an edge :math:`i \to j` when :math:`Q_{ij} > 0`
(:math:`i \ne j`). Its strongly connected components are the communicating
classes; a class is *closed* (recurrent, for a finite chain) when no edge
leaves it. A finite CTMC has a unique stationary distribution iff it has
exactly one closed class; it is then zero on every other (transient) state.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

__all__ = ["ClassStructure", "class_structure"]


@dataclass(frozen=True)
class ClassStructure:
    """Communicating classes of a chain.

    Attributes
    ----------
    labels : ndarray of int, shape (n_states,)
        Class label of each state.
    n_classes : int
    closed : ndarray of bool, shape (n_classes,)
        Whether each class is closed.
    """

    labels: np.ndarray
    n_classes: int
    closed: np.ndarray

    @property
    def closed_classes(self) -> list:
        """State indices of each closed class (sorted by smallest index)."""
        out = [np.flatnonzero(self.labels == c) for c in np.flatnonzero(self.closed)]
        return sorted(out, key=lambda a: a[0])

    @property
    def is_irreducible(self) -> bool:
        return self.n_classes == 1

    @property
    def recurrent(self) -> np.ndarray:
        """Mask of states in closed classes."""
        return self.closed[self.labels]


def _offdiag_pattern(Q: sp.csr_matrix) -> sp.csr_matrix:
    A = Q.tocsr(copy=True)
    A.setdiag(0)
    A.data = (A.data > 0).astype(np.int8)
    A.eliminate_zeros()
    return A


def class_structure(Q: sp.csr_matrix) -> ClassStructure:
    """Strongly connected components of ``Q``'s graph and which are closed.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> Q = sp.csr_matrix(np.array([[-1., 1, 0], [0, -1, 1], [0, 1, -1]]))
    >>> cs = class_structure(Q)
    >>> cs.n_classes, [c.tolist() for c in cs.closed_classes]
    (2, [[1, 2]])
    """
    A = _offdiag_pattern(Q)
    n_cls, labels = connected_components(A, directed=True, connection="strong")
    coo = A.tocoo()
    leaving = labels[coo.row] != labels[coo.col]
    closed = np.ones(n_cls, dtype=bool)
    closed[labels[coo.row[leaving]]] = False
    return ClassStructure(labels, int(n_cls), closed)
