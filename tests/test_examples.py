"""Every example runs, and its printed cross-checks hold; figures only where asked.

An example that draws takes ``--plots DIR`` (the spelling of ``ctmc report``),
writes its figures there through :func:`ctmc.report.save_figure` and prints
``figure written: <path>`` for each; without ``--plots`` it draws nothing and
does not need matplotlib.
"""
import pathlib
import re
import runpy
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))

#: examples that draw, with options that make them fast (a second or less each)
PLOTTING = {
    "hysteresis_sip_thresholds.py": ["--step", "18"],
    "hysteresis_width.py": ["--step", "8"],
    "jsq_ordering.py": ["--K", "6"],
    "supermarket_meanfield.py": ["--nmax", "2", "--budget", "1000", "--tol", "1e-5"],
    "meanfield_sir.py": ["--N", "10", "20", "40"],
    "meanfield_load_balancing.py": ["--N", "10", "15", "20"],
}
WRITTEN = re.compile(r"^figure written: (.+)$", re.MULTILINE)


def _run(path, args, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(path), *args])
    runpy.run_path(str(path), run_name="__main__")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, capsys, monkeypatch, tmp_path):
    # without --plots: no figure, no file anywhere we can see, and no matplotlib needed
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # `import matplotlib` now fails
    _run(path, [], monkeypatch)
    out = capsys.readouterr().out
    assert out.strip()
    assert not WRITTEN.search(out) and not list(tmp_path.iterdir())


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_has_help(path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exc:
        _run(path, ["--help"], monkeypatch)
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "Run" in out                                   # the docstring says how to run it
    assert ("--plots DIR" in out) == (path.name in PLOTTING)


def test_plotting_examples_are_the_ones_listed():
    # one spelling, no temporary folders: a new example that draws joins PLOTTING
    for path in EXAMPLES:
        src = path.read_text(encoding="utf-8")
        assert ("add_plots_argument" in src or "plot_errors" in src) == (path.name in PLOTTING), path.name
        assert "tempfile" not in src and '"--plot"' not in src and "savefig" not in src, path.name


@pytest.mark.parametrize("name", sorted(PLOTTING))
def test_plotting_example_writes_what_it_says(name, capsys, monkeypatch, tmp_path):
    pytest.importorskip("matplotlib", reason="figures need matplotlib (the 'plot' extra)")
    monkeypatch.chdir(tmp_path)
    plots = tmp_path / "figures" / "new"                  # created by the example
    _run(EXAMPLES[0].parent / name, [*PLOTTING[name], "--plots", str(plots)], monkeypatch)
    said = sorted(pathlib.Path(p) for p in WRITTEN.findall(capsys.readouterr().out))
    assert said, f"{name} said it wrote no figure"
    assert said == sorted(p for p in tmp_path.rglob("*") if p.is_file())   # nothing else, nowhere else
    for p in said:
        assert p.parent == plots and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000


def test_save_figure_creates_the_folder_and_says_where(tmp_path):
    pytest.importorskip("matplotlib", reason="figures need matplotlib (the 'plot' extra)")
    from ctmc.report import new_figure, save_figure

    fig = new_figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [1, 0])
    lines = []
    path = save_figure(fig, tmp_path / "a" / "b", "line.png", say=lines.append)
    assert path == tmp_path / "a" / "b" / "line.png" and path.stat().st_size > 0
    assert lines == [f"figure written: {path}"]
    with pytest.raises(ValueError, match="file name"):
        save_figure(fig, tmp_path, "sub/line.png", say=None)


def test_family_figures_go_through_save_figure(tmp_path):
    # ctmc report --plots DIR: the families write with the same function and the same line
    pytest.importorskip("matplotlib", reason="figures need matplotlib (the 'plot' extra)")
    from ctmc.models.hysteresis import report
    from ctmc.models.supermarket import plot_errors

    out = report(tmp_path / "h")
    assert f"figure written: {tmp_path / 'h' / 'hysteresis_law.png'}" in out
    lines = []
    path = plot_errors([2, 3, 4], [0.3, 0.2, 0.15], [0.1, 0.05, 0.03], tmp_path / "s", say=lines.append)
    assert lines == [f"figure written: {path}"] and path.stat().st_size > 5000


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
    assert ex.main(["--K", "10"]).count("figure written") == 0
