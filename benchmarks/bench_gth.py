"""GTH (``ctmc.linalg.gth_solve``): the numpy route against the compiled kernel, in the same run.

    .venv/bin/python benchmarks/bench_gth.py                          # n = 100 ... 4000, dense and banded
    .venv/bin/python benchmarks/bench_gth.py --sizes 500,1000 --kinds banded --repeat 5

Chains (irreducible, seed 1):

* ``dense``: every rate uniform on [0, 1), an O(n^3) elimination;
* ``banded``: rates within ``--band`` states of the diagonal plus the wrap-around n-1 -> 0 (whose
  fill-in makes the last row and column of the envelope full), O(n b^2) plus the
  envelope's O(n^2) set-up.

Each route is timed end to end (``gth_solve``, the envelope and the final normalisation
included), best of ``--repeat`` runs (one above 1000 states); ``same`` says whether the two
answers are equal to the bit, as the kernel promises.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from ctmc._relax import extension, use_compiled
from ctmc.linalg import gth_solve


def chain(kind: str, n: int, band: int, rng: np.random.Generator) -> np.ndarray:
    R = rng.random((n, n))
    if kind == "banded":
        R = np.triu(np.tril(R, band), -band)
        R[n - 1, 0] = 1.0
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


def best(Q: np.ndarray, compiled: bool, repeat: int):
    before = use_compiled(compiled)
    try:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            x = gth_solve(Q)
            times.append(time.perf_counter() - t0)
    finally:
        use_compiled(before)
    return min(times), x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,500,1000,2000,4000", help="numbers of states, comma-separated")
    ap.add_argument("--kinds", default="dense,banded", help="dense, banded")
    ap.add_argument("--band", type=int, default=5, help="the banded chains' half bandwidth (default 5)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (one above 1000 states)")
    args = ap.parse_args()
    if getattr(extension(), "gth", None) is None:
        raise SystemExit("the compiled extension with its gth kernel is not built (or CTMC_KERNELS=0)")
    rng = np.random.default_rng(1)
    print(f"{'chain':>7} {'n':>6} {'numpy [ms]':>11} {'compiled [ms]':>14} {'ratio':>7} {'same':>5}")
    for kind in args.kinds.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            Q = chain(kind, n, args.band, rng)
            repeat = args.repeat if n <= 1000 else 1
            slow, x = best(Q, False, repeat)
            fast, y = best(Q, True, repeat)
            print(f"{kind:>7} {n:>6} {1e3 * slow:>11.2f} {1e3 * fast:>14.2f} {slow / fast:>7.1f} "
                  f"{str(bool(np.array_equal(x, y))):>5}", flush=True)


if __name__ == "__main__":
    main()
