r"""Two queues under join-the-shortest-queue with asymmetric service (Tibi 2019).

The model
---------
Two queues of capacity :math:`K` each receive a Poisson stream of rate
:math:`\rho`; every arrival joins the shorter queue (ties: either one) and is
lost only when both queues are full. While the queues are unequal the shorter
one is served at rate :math:`\mu_1` and the longer one at
:math:`\mu_2 = 1 - \mu_1`; equal queues are each served at rate 1/2. In the
extended model the lone busy server (shorter queue empty, longer one not)
works at rate :math:`\nu`: :math:`\nu = \mu_2` is the standard model,
:math:`\nu > \mu_2` means the idle server helps (:math:`\nu = 1`: full
pooling), :math:`\nu < \mu_2` that it disturbs.

The reduced state is :math:`(x, y)` = (shortest, longest),
:math:`0 \le x \le y \le K`, :math:`N = x + y`:

=====================  ===============  ================
from                   to               rate
=====================  ===============  ================
(x, y), x < y          (x+1, y)         :math:`\rho`
(n, n), n < K          (n, n+1)         :math:`\rho`
(x, y), 1 <= x < y     (x-1, y)         :math:`\mu_1`
(x, y), 1 <= x < y     (x, y-1)         :math:`\mu_2`
(n, n), n >= 1         (n-1, n)         1
(0, y), y >= 1         (0, y-1)         :math:`\nu`
=====================  ===============  ================

Saturation is the hitting of :math:`(K, K)`. JSQ sends an arrival to a full
queue only when both are full, so the finite-:math:`K` process equals the
infinite-capacity one until saturation.

The closed forms and their subtraction-free evaluation live in
:mod:`models.jsq.closed_forms`, the exact level recursions (saturation
transform, first-equality law) and large-K expansions in
:mod:`models.jsq.tibi`, the chain in :mod:`models.jsq.model`, the
parameter checks both share in :mod:`models.jsq.parameters` and the
``ctmc jsq`` command in :mod:`models.jsq.cli`.

References
----------
D. Tibi, "Martingales and buffer overflow for the symmetric shortest queue
model", Queueing Systems 93 (2019). D. Dester, C. Fricker, D. Tibi,
"Stationary analysis of the shortest queue problem", Queueing Systems (2017).

Examples
--------
>>> from ctmc.models.jsq import JSQ2, blocking_probability
>>> q = JSQ2(K=10, rho=0.9, mu2=0.5)
>>> round(q.blocking_probability(), 13)       # design notes: 0.0152027282106
0.0152027282106
>>> abs(q.blocking_probability() / blocking_probability(10, 0.9, 0.5) - 1) < 1e-12
True
>>> round(float(q.saturation_times()[q.chain().index(s=0, l=0)]), 7)   # 460.2416647
460.2416647
"""
from __future__ import annotations

from .closed_forms import (blocking_probability, log_blocking_probability, log_saturation_mean,
                           saturation_mean, total_number_law)
from .model import JSQ2, JSQMeasures
from .tibi import (blocking_expansion, first_equality_law, saturation_laplace, saturation_mean_expansion)
from .cli import add_arguments, report, run

__all__ = [
    "JSQ2",
    "JSQMeasures",
    "blocking_probability",
    "log_blocking_probability",
    "saturation_mean",
    "log_saturation_mean",
    "total_number_law",
    "saturation_laplace",
    "first_equality_law",
    "saturation_mean_expansion",
    "blocking_expansion",
]
