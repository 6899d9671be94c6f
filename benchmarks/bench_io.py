"""Reading a big PRISM ``.tra`` (and ``.sta``): this tree's strict readers against a baseline commit's.

The files are written once by ``ctmc.io.write_prism`` from the JSQ model
(``ctmc.models.jsq.JSQ2``, K = 1700 by default: 1.45e6 states, 4.3e6
transitions, an 80 MB ``.tra``). The baseline is ``ctmc/io`` of a commit
(``--baseline``, default b892685, before the strict number rule), imported
from ``git show`` as a package of its own beside this tree's ``ctmc.io``;
both read the same files in the same run, alternately, ``--repeat`` times,
and the chains read must be equal. Reported: the best time of each and
their ratio (this tree / baseline: below 1 is faster).

``--drn`` reads a DRN file of the same chain instead (line by line in both).

Run: .venv/bin/python benchmarks/bench_io.py [--K 1700] [--repeat 2] [--baseline REV] [--sta | --drn]
"""
import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def baseline_io(rev: str, where: Path):
    """``ctmc/io`` of the commit ``rev``, imported as the package ``ctmc._io_baseline``."""
    d = where / "io_baseline"
    d.mkdir()
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:ctmc/io"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    for name in names:
        if name.endswith(".py"):
            (d / name).write_bytes(subprocess.run(["git", "show", f"{rev}:ctmc/io/{name}"], cwd=ROOT,
                                                  check=True, capture_output=True).stdout)
    import ctmc  # noqa: F401  (the baseline's relative imports resolve in this tree's ctmc)
    spec = importlib.util.spec_from_file_location("ctmc._io_baseline", d / "__init__.py",
                                                  submodule_search_locations=[str(d)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ctmc._io_baseline"] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=1700)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--baseline", default="b892685")
    ap.add_argument("--sta", action="store_true", help="read the .sta file too")
    ap.add_argument("--drn", action="store_true", help="read a DRN file of the chain instead")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ctmc.io
    from bench_jsq import MU2
    from ctmc.models.jsq import JSQ2
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        old = baseline_io(args.baseline, tmp)
        chain = JSQ2(args.K, 0.9, MU2).chain()
        m = chain.Q.nnz - chain.n_states
        if args.drn:
            files, reader = (ctmc.io.write_drn(chain, tmp / "jsq.drn"),), "read_drn"
        else:
            tra, sta = ctmc.io.write_prism(chain, tmp / "jsq")[:2]
            files, reader = ((tra, sta) if args.sta else (tra,)), "read_prism"
        print(f"K={args.K}: {chain.n_states} states, {m} transitions, "
              + ", ".join(f"{p.name} {p.stat().st_size / 1e6:.0f} MB" for p in files), flush=True)
        best = {"baseline": np.inf, "this tree": np.inf}
        for _ in range(args.repeat):
            for name, mod in (("baseline", old), ("this tree", ctmc.io)):
                t0 = time.perf_counter()
                got = getattr(mod, reader)(*files)
                best[name] = min(best[name], time.perf_counter() - t0)
                assert (got.Q != chain.Q).nnz == 0 and got.n_states == chain.n_states
                del got
        for name, t in best.items():
            print(f"  {name:10s} {reader} {t:7.2f} s")
        print(f"  ratio this tree / baseline: {best['this tree'] / best['baseline']:.2f}")


if __name__ == "__main__":
    main()
