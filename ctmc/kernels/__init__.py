"""Building blocks shared by the analyses, written once on the backend protocol.

Every function here takes ``op``, a backend operator (:class:`ctmc.backends.base.Operator`),
and works on its owned part of each vector, so it runs on every backend.

- :mod:`ctmc.kernels.evidence`: residuals, balance errors, error bounds and the one grading rule;
- :mod:`ctmc.kernels.classes`: closed classes, pins and global reductions on owned vectors;
- :mod:`ctmc.kernels.sweeps`: Gauss-Seidel sweeps, the stopping rule of the iterations, dense GTH on a class;
- :mod:`ctmc.kernels.plan`: the structure facts and the ``auto`` plan;
- :mod:`ctmc.kernels.levels`: the return-time system solved on the levels of a level chain (``level_iad``);
- :mod:`ctmc.kernels.registry`: :class:`~ctmc.kernels.registry.Method`, the shape of every analysis' registry.

The kernels import no analysis (:mod:`ctmc.stationary`, :mod:`ctmc.passage`, ...): the analyses
import them.
"""
