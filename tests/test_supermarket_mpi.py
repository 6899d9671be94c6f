"""The supermarket family on PETSc over two MPI processes against the scipy route.

``Supermarket(..., backend="petsc")`` assembles the declared chain
(:func:`ctmc.models.supermarket.occupancy_model`) with
``DistributedChain.from_model`` (each process builds and holds its block of
rows only) and solves it there; the scipy route builds the same chain by the
combinatorial ranking in one process. One ``mpirun -n 2`` job runs this file
as a script, rank 0 writes the numbers to a JSON file and the tests judge
them: every stationary probability (down to 1e-76 here) to 1e-9 relative,
state by state, once the two numberings are matched by ``occupancy_rank``.
Skipped, with the reason, without petsc4py or mpirun.
"""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: (name, keyword arguments of Supermarket): probabilities down to 1e-76 (n = 2, lam = 0.1, B = 38; the
#: declared model's box, (n + 1)^B codes, must stay below 2^63), sampling
#: without replacement, an overloaded system with a capacity
CASES = {
    "n4_d2": dict(n=4, d=2, lam=0.7, capacity=6),
    "deep_tail": dict(n=2, d=2, lam=0.1, capacity=38),
    "without_replacement": dict(n=5, d=3, lam=0.9, capacity=5, replacement=False),
    "overloaded": dict(n=3, d=2, lam=1.4, capacity=8),
}


def _job(out_path):
    import faulthandler
    faulthandler.dump_traceback_later(240, exit=True)   # a collective left unmatched would hang
    from ctmc.backends.petsc_backend import load_petsc
    from ctmc.models.supermarket import Supermarket, occupancy_rank

    comm = load_petsc().COMM_WORLD
    out = {"size": comm.getSize(), "cases": {}}
    for name, kw in CASES.items():
        ref = Supermarket(**kw)
        dist = Supermarket(**kw, backend="petsc")
        dc, res = dist.chain(), dist.stationary()
        B = dist.capacity
        pi = dc.gather(res.pi, "all")                         # the blocks, in process order
        rank = occupancy_rank(np.column_stack([dc.states[f"M{k}"] for k in range(1, B + 1)]), kw["n"])
        pi_ref = np.empty_like(pi)
        pi_ref[:] = ref.stationary().pi[rank]
        rows = dc.allgather([dc.start, dc.stop, dc._nnz]).astype(int).tolist()
        out["cases"][name] = {
            "status": res.status.value, "states": int(dc.n_states), "ref_states": int(ref.chain().n_states),
            "rel_pi": float(np.max(np.abs(pi / pi_ref - 1))), "min_pi": float(pi_ref.min()),
            "rel_tail": float(np.max(np.abs(dist.tail() / ref.tail() - 1))),
            "rel_loss": abs(dist.loss_probability() / ref.loss_probability() - 1),
            "total_nnz": int(ref.chain().Q.nnz), "rows": rows}
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    _job(sys.argv[1])
    sys.exit(0)



from mpi_jobs import needs_mpi, run_job  # noqa: E402

pytestmark = [pytest.mark.petsc, needs_mpi]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(__file__, tmp_path_factory.mktemp("mpi_supermarket") / "results.json")


@pytest.mark.parametrize("name", sorted(CASES))
def test_two_ranks_supermarket_matches_scipy_state_by_state(job, name):
    r = job["cases"][name]
    assert r["status"] == "success" and r["states"] == r["ref_states"]
    assert r["rel_pi"] < 1e-9, r            # every probability, the smallest included
    assert r["rel_tail"] < 1e-9 and r["rel_loss"] < 1e-9, r
    if name == "deep_tail":
        assert r["min_pi"] < 1e-70          # the comparison reaches the deep tail
    (a0, b0, nnz0), (a1, b1, nnz1) = r["rows"]
    assert a0 == 0 and b0 == a1 and b1 == r["states"]          # two contiguous blocks
    assert max(nnz0, nnz1) < r["total_nnz"]                     # neither holds the whole generator


def test_one_rank_supermarket_matches_scipy():
    from ctmc.models.supermarket import Supermarket
    kw = CASES["deep_tail"]
    a, b = Supermarket(**kw), Supermarket(**kw, backend="petsc")
    assert b.stationary().status.value == "success"
    assert np.max(np.abs(b.tail() / a.tail() - 1)) < 1e-9
    assert b.loss_probability() == pytest.approx(a.loss_probability(), rel=1e-9)
