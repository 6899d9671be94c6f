"""Every example runs, and its printed cross-checks hold."""
import pathlib
import runpy
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_first_equality_example_is_consistent():
    sys.path.insert(0, str(EXAMPLES[0].parent))
    import jsq_first_equality as ex
    law, mean, deriv = ex.main(K=15)
    assert abs(law.sum() - 1) < 1e-12 and (law >= 0).all()
    assert deriv == pytest.approx(mean, rel=1e-4)


def test_jsq_ordering_example_claims_hold(tmp_path):
    sys.path.insert(0, str(EXAMPLES[0].parent))
    import jsq_ordering as ex
    mus, N, L, ext, viol = ex.study(K=12, rho=0.8, n_mu=6)
    assert max(viol.values()) < 1e-13
    # the orderings are not vacuous: the extremes differ by orders of magnitude
    assert N[0, 12] > 10 * N[-1, 12]
    out = ex.main(["--K", "10", "--plots", str(tmp_path)])
    assert (tmp_path / "jsq_ordering.png").stat().st_size > 10000 and "violations" in out
