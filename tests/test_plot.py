"""ctmc.plot: the figures draw their inputs, their bounds and their labels, and nothing else.

Every check reads the figure back (the data of the Line2D, the segments of the
error bars, the vertices of a band) and compares it with an answer computed
independently: closed forms of small chains, a planted power law, the inputs.
"""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

mpl = pytest.importorskip("matplotlib", reason="figures need matplotlib (the 'plot' extra)")
mpl.use("Agg")

import ctmc  # noqa: E402
from ctmc import plot  # noqa: E402


def mm1k(K, rho):
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("arrive", guard=n < K, rate=rho, update={n: n + 1})
    m.event("serve", guard=n > 0, rate=1.0, update={n: n - 1})
    return m.build(initial={"n": 0}), n


def lines(ax, style=None):
    return [ln for ln in ax.lines if style is None or ln.get_linestyle() == style]


def band(ax):
    """``{x: (low, high)}`` of the one fill_between band of ``ax``."""
    (coll,) = ax.collections
    out = {}
    for x, y in coll.get_paths()[0].vertices:
        lo, hi = out.get(x, (np.inf, -np.inf))
        out[x] = (min(lo, y), max(hi, y))
    return out


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


# ---------------------------------------------------------------------------
# law
# ---------------------------------------------------------------------------
def test_law_draws_the_marginal_of_a_stationary_result_with_its_bound():
    chain, n = mm1k(30, 0.5)
    res = chain.stationary()
    ax = plot.law(res, "n")
    (line,) = lines(ax)
    marg = res.marginal("n")
    assert line.get_xdata().tolist() == sorted(marg)
    assert line.get_ydata().tolist() == [marg[k] for k in sorted(marg)]
    closed = 0.5 ** np.arange(31) * 0.5 / (1 - 0.5 ** 31)            # (1 - rho) rho^k / (1 - rho^(K+1))
    np.testing.assert_allclose(line.get_ydata(), closed, rtol=1e-12)
    # the band is the result's bound on ||pi - pi_exact||_1, hence on each marginal probability
    for x, (lo, hi) in band(ax).items():
        p = marg[int(x)]
        assert lo == pytest.approx(p - res.error_bound, abs=1e-15)
        assert hi == pytest.approx(p + res.error_bound, abs=1e-15)
    assert ax.get_xlabel() == "x (value of n)" and ax.get_ylabel() == "P(n = x)"
    assert any("(absolute)" in t for t in legend_texts(ax))


def test_law_of_a_dict_with_a_visible_bound_band():
    law = {2: 0.25, 0: 0.5, 5: 0.25}
    ax = plot.law(law, bound=0.01)
    (line,) = lines(ax)
    assert line.get_xdata().tolist() == [0, 2, 5] and line.get_ydata().tolist() == [0.5, 0.25, 0.25]
    assert band(ax) == {0.0: (0.49, 0.51), 2.0: (0.24, 0.26), 5.0: (0.24, 0.26)}


def test_law_on_a_log_axis_reaches_1e_300_and_leaves_zeros_out(tmp_path):
    law = {0: 0.5, 1: 0.5 - 1e-300, 2: 1e-300, 3: 0.0}
    ax = plot.law(law, "k", log=True)
    (line,) = lines(ax)
    assert ax.get_yscale() == "log"
    assert line.get_ydata().tolist() == [0.5, 0.5 - 1e-300, 1e-300, 0.0]   # the data are the inputs
    path = plot.save(ax, tmp_path / "tail.pdf")                            # it draws
    lo, hi = ax.get_ylim()
    assert 0 < lo <= 1e-300 and 0.5 <= hi < 10      # the axis shows 1e-300; the zero is masked, not -inf
    assert path.read_bytes()[:5] == b"%PDF-"


def test_law_on_a_log_axis_draws_the_bound_as_a_curve():
    chain, n = mm1k(200, 0.5)
    res = chain.stationary()
    ax = plot.law(res, "n", log=True)
    (bound_line,) = lines(ax, ":")
    assert np.all(bound_line.get_ydata() == res.error_bound)
    assert min(lines(ax, "-")[0].get_ydata()) == pytest.approx(0.5 ** 201 / (1 - 0.5 ** 201), rel=1e-10)


def test_law_bad_input_names_the_argument():
    chain, n = mm1k(3, 0.5)
    with pytest.raises(ValueError, match="^by:"):
        plot.law(chain.stationary())
    with pytest.raises(ValueError, match="^result_or_marginal:"):
        plot.law({0: 0.0, 1: 0.0}, log=True)
    with pytest.raises(ValueError, match="^result_or_marginal:"):
        plot.law({"a": 1.0})
    with pytest.raises(ValueError, match="^result_or_marginal:"):
        plot.law(chain.transient({"n": 0}, [1.0, 2.0]), "n")
    with pytest.raises(ValueError, match="^bound:"):
        plot.law({0: 1.0}, bound=-1.0)
    with pytest.raises(ValueError, match="^ax:"):
        plot.law({0: 1.0}, ax="axes")


# ---------------------------------------------------------------------------
# transient and passage_cdf
# ---------------------------------------------------------------------------
def test_transient_of_prob_within_is_the_closed_form_with_its_band():
    c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]], initial=0)
    ts = np.linspace(0.0, 3.0, 13)
    res = c.prob_within([1], ts)
    ax = plot.transient(None, res)
    (line,) = lines(ax)
    assert line.get_xdata().tolist() == ts.tolist() and line.get_ydata().tolist() == res.value.tolist()
    np.testing.assert_allclose(line.get_ydata(), 1 - np.exp(-2 * ts), atol=1e-14)
    assert "T_A" in ax.get_ylabel() and ax.get_xlabel() == "time t"
    with pytest.raises(ValueError, match="^times:"):
        plot.transient(ts[:-1], res)


def test_transient_of_arrays_band_equals_the_bounds():
    t, v, b = [0.0, 1.0, 2.0], [1.0, 2.0, 4.0], [0.1, 0.2, 0.5]
    ax = plot.transient(t, v, bound=b, quantity="queue length")
    (line,) = lines(ax)
    assert line.get_ydata().tolist() == v
    assert {x: (round(lo, 12), round(hi, 12)) for x, (lo, hi) in band(ax).items()} == \
        {0.0: (0.9, 1.1), 1.0: (1.8, 2.2), 2.0: (3.5, 4.5)}
    assert ax.get_ylabel() == "queue length" and any("(absolute)" in s for s in legend_texts(ax))


def test_an_infinite_bound_is_said_and_leaves_its_point_out_of_the_band():
    ax = plot.transient([0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], bound=[0.1, np.inf, 0.1, 0.1])
    assert legend_texts(ax) == ["error bound (absolute) ≤ inf"]
    assert all(np.isfinite(v).all() for v in band(ax).values())
    ax = plot.transient([0.0, 1.0], [1.0, 2.0], bound=[0.1, float("nan")])      # nan among numbers: no bound
    assert legend_texts(ax) == ["error bound (absolute) ≤ inf"]
    with pytest.raises(ValueError, match="^bound:"):
        plot.transient([0.0, 1.0], [1.0, 2.0], bound=[0.1, 0.1, 0.1])


def test_transient_result_with_a_reward_draws_its_mean_and_the_scaled_bound():
    chain, n = mm1k(8, 0.5)
    ts = np.linspace(0.0, 10.0, 11)
    tr = chain.transient({"n": 0}, ts)
    ax = plot.transient(None, tr, reward=n, bound=None)
    (line,) = lines(ax)
    mean = tr.p @ np.arange(9)                        # E[n(t)] from the law itself
    np.testing.assert_allclose(line.get_ydata(), mean, rtol=1e-14)
    b = tr.error_bound * 8                            # ||p err||_1 max|r|, r = n <= 8
    if b > 0:
        assert all(hi - lo == pytest.approx(2 * b, abs=1e-15) for lo, hi in band(ax).values())
    with pytest.raises(ValueError, match="^reward:"):
        plot.transient(None, tr)
    with pytest.raises(ValueError, match="^times:"):
        plot.transient(None, [1.0, 2.0])


def test_passage_cdf_of_a_first_passage_result_is_the_closed_form():
    # from 0, leave at rate 3 for state 1 (1/3) or 2 (2/3): P(T <= t) = 1 - exp(-3t)
    c = ctmc.CTMC([[-3.0, 1.0, 2.0], [0, 0, 0], [0, 0, 0]])
    ts = np.linspace(0.0, 2.0, 9)
    fp = c.first_passage([1, 2], t=ts)
    with pytest.raises(ValueError, match="^source:"):
        plot.passage_cdf(fp)                          # three sources: which one?
    ax = plot.passage_cdf(fp, source=0, log=True)
    (line,) = lines(ax, "-")
    assert line.get_xdata().tolist() == ts.tolist()
    np.testing.assert_allclose(line.get_ydata()[1:], -np.expm1(-3 * ts[1:]), rtol=1e-12)
    assert line.get_ydata()[0] == 0.0 and ax.get_yscale() == "log"
    assert np.all(lines(ax, ":")[0].get_ydata() == fp.error_bound)
    assert "T_A" in ax.get_ylabel()
    with pytest.raises(ValueError, match="^survival:"):
        plot.passage_cdf(fp, source=0, survival=True)
    with pytest.raises(ValueError, match="^source:"):
        plot.passage_cdf(fp, source=7)


def test_passage_cdf_of_a_phase_type_survival_in_the_far_tail():
    law = ctmc.ph.erlang(2, mean=1.0)                 # rate 2 per phase: P(T > t) = exp(-2t) (1 + 2t)
    ts = np.array([0.5, 10.0, 100.0, 300.0])
    ax = plot.passage_cdf(law, ts, survival=True, log=True)
    (line,) = lines(ax)
    np.testing.assert_allclose(line.get_ydata(), np.exp(-2 * ts) * (1 + 2 * ts), rtol=1e-10)
    assert line.get_ydata()[-1] < 1e-250 and ax.get_ylim()[0] <= line.get_ydata()[-1]
    assert ax.get_ylabel() == "$P(T_A > t)$"
    with pytest.raises(ValueError, match="^times:"):
        plot.passage_cdf(law)


# ---------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------
def sweep_rows():
    """P(block) of M/M/1/K in closed form over (K, rho), rows shuffled, one failed and one without a value."""
    rows = []
    for K in (5, 10):
        for rho in (0.9, 0.3, 0.6):
            p = rho ** K * (1 - rho) / (1 - rho ** (K + 1))
            rows.append({"K": K, "rho": rho, "measure": "P(block)", "value": p, "error_bound": p / 10,
                         "status": "success", "method": "gth", "seconds": 0.01})
            rows.append({"K": K, "rho": rho, "measure": "mean", "value": 1.0, "error_bound": 0.0,
                         "status": "success", "method": "gth", "seconds": 0.01})
    rows[0]["status"] = "inaccurate"                              # K = 5, rho = 0.9
    rows[8]["value"], rows[8]["status"] = None, "breakdown"      # K = 10, rho = 0.3
    return rows


def test_sweep_draws_values_and_error_bars_equal_to_the_bounds():
    rows = sweep_rows()
    ax = plot.sweep(rows, "rho", y="P(block)", by="K")
    conts = ax.containers
    assert [c.get_label() for c in conts] == ["K = 5", "K = 10"]
    for cont, K in zip(conts, (5, 10)):
        mine = sorted((r for r in rows if r["K"] == K and r["measure"] == "P(block)"), key=lambda r: r["rho"])
        data_line, _, (bars,) = cont.lines
        assert data_line.get_xdata().tolist() == [r["rho"] for r in mine]
        want = [np.nan if r["value"] is None else r["value"] for r in mine]
        np.testing.assert_array_equal(data_line.get_ydata(), want)
        segs = {round(s[0][0], 12): (s[0][1], s[1][1]) for s in bars.get_segments() if len(s)}
        for r in mine:
            if r["value"] is not None:
                lo, hi = segs[round(r["rho"], 12)]
                assert lo == pytest.approx(r["value"] - r["error_bound"], rel=1e-12)
                assert hi == pytest.approx(r["value"] + r["error_bound"], rel=1e-12)
    # the failed row is drawn hollow at its value; the row without a value is a cross at its x
    (hollow,) = [ln for ln in ax.lines if ln.get_markerfacecolor() == "none"]
    assert hollow.get_xdata().tolist() == [0.9] and hollow.get_ydata().tolist() == [rows[0]["value"]]
    (cross,) = [ln for ln in ax.lines if ln.get_marker() == "x"]
    assert cross.get_xdata().tolist() == [0.3]
    assert ax.get_xlabel() == "rho" and ax.get_ylabel() == "P(block) ± absolute bound"


def test_sweep_relative_bounds_and_a_dataframe_give_the_same_bars():
    pd = pytest.importorskip("pandas")
    rows = [r for r in sweep_rows() if r["K"] == 5]
    ax = plot.sweep(pd.DataFrame(rows), "rho", y="P(block)", relative=True)
    (cont,) = ax.containers
    segs = sorted((s[0][0], s[1][1] - s[0][1]) for s in cont.lines[2][0].get_segments())
    mine = sorted((r["rho"], 2 * abs(r["value"]) * r["error_bound"])
                  for r in rows if r["measure"] == "P(block)")
    np.testing.assert_allclose(segs, mine, rtol=1e-12)
    assert "relative" in ax.get_ylabel()


def test_sweep_bad_input_names_the_argument():
    rows = sweep_rows()
    with pytest.raises(ValueError, match="^x: 'lam'.*'K', 'rho'"):
        plot.sweep(rows, "lam", y="P(block)")
    with pytest.raises(ValueError, match="^y: the sweep has 2 measures"):
        plot.sweep(rows, "rho")
    with pytest.raises(ValueError, match="^y: 'P'"):
        plot.sweep(rows, "rho", y="P")
    with pytest.raises(ValueError, match="^by: 'N'"):
        plot.sweep(rows, "rho", y="P(block)", by="N")
    with pytest.raises(ValueError, match=r"^by: several rows .* \['K'\]"):
        plot.sweep(rows, "rho", y="P(block)")                   # K varies too
    with pytest.raises(ValueError, match="^frame_or_records:"):
        plot.sweep("rows", "rho")
    with pytest.raises(ValueError, match="^frame_or_records: no column 'value'"):
        plot.sweep([{"rho": 1, "measure": "m"}], "rho")


# ---------------------------------------------------------------------------
# meanfield_error
# ---------------------------------------------------------------------------
def test_meanfield_error_fits_the_slope_of_a_planted_power_law():
    N = np.array([10, 20, 50, 100, 1000])
    slope, icpt = plot.loglog_fit(N, 3 / N)
    assert abs(slope + 1) < 1e-12 and abs(math.exp(icpt) - 3) < 1e-12
    slope, icpt = plot.loglog_fit(N, 2 * N ** (-1 / 3))     # a slope no rounding would keep
    assert abs(slope + 1 / 3) < 1e-12 and abs(math.exp(icpt) - 2) < 1e-12
    ax = plot.meanfield_error(N, {"mean field": 3 / N, "refined": 0.5 / N ** 2})
    data = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    fits = [ln for ln in ax.lines if ln.get_linestyle() == "--"]
    assert [ln.get_ydata().tolist() for ln in data] == [(3 / N).tolist(), (0.5 / N ** 2).tolist()]
    for fit, want in zip(fits, (-1.0, -2.0)):          # the drawn line has the fitted slope
        x, y = fit.get_xdata(), fit.get_ydata()
        assert abs(math.log(y[-1] / y[0]) / math.log(x[-1] / x[0]) - want) < 1e-12
    assert legend_texts(ax) == ["mean field (slope -1.00)", "refined (slope -2.00)"]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_ylabel() == "|E_N - approx.| (absolute)"


def test_meanfield_error_labels_and_zero_errors():
    N = [10, 20, 40, 80]
    e = [0.3, 0.15, 0.0, 0.0375]                      # 3/N with one exact answer: fitted on the others
    ax = plot.meanfield_error(N, e, quantity="mean jobs", relative=True)
    assert ax.get_ylabel() == "mean jobs\n|E_N - mean field| / |E_N| (relative)"
    assert legend_texts(ax) == ["mean field (slope -1.00)"]
    assert plot.meanfield_error(N, e).get_ylabel() == "|E_N - mean field| (absolute)"
    with pytest.raises(ValueError, match="^errors:"):
        plot.meanfield_error(N, [1.0, 2.0])
    with pytest.raises(ValueError, match="^errors:"):
        plot.meanfield_error(N, [0.0] * 4)
    with pytest.raises(ValueError, match="^N:"):
        plot.meanfield_error([0, 1, 2, 3], e)
    with pytest.raises(ValueError, match="^errors:"):
        plot.loglog_fit([10, 20], [1.0, 0.0])


def test_supermarket_figure_is_the_meanfield_error_figure(tmp_path, monkeypatch):
    from ctmc.models.supermarket import plot as family_plot
    drawn = []

    def spy(*args, **kwargs):
        drawn.append(ax := plot.meanfield_error(*args, **kwargs))
        return ax
    monkeypatch.setattr(family_plot, "meanfield_error", spy)
    path = family_plot.plot_errors([2, 3, 4], [0.3, 0.2, 0.15], [0.1, 0.05, 0.03], tmp_path, say=None)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = drawn
    assert ax.get_ylabel() == "mean jobs per server\n|E_N - approx.| (absolute)"
    assert [ln.get_ydata().tolist() for ln in ax.lines if ln.get_linestyle() == "-"] == \
        [[0.3, 0.2, 0.15], [0.1, 0.05, 0.03]]


# ---------------------------------------------------------------------------
# size, style, files, the missing extra
# ---------------------------------------------------------------------------
def test_a_new_figure_is_one_column_and_leaves_the_global_settings_alone(tmp_path):
    before = dict(mpl.rcParams)
    ax = plot.law({0: 0.5, 1: 0.5}, "n")
    assert tuple(ax.figure.get_size_inches()) == (3.4, 2.4)
    plot.save(ax, tmp_path / "a.svg")                   # ticks are made at draw time, outside the context
    sizes = {t.get_fontsize() for t in ax.get_xticklabels() + ax.get_yticklabels()}
    assert sizes == {8.0} and ax.xaxis.label.get_fontsize() == 8.0
    assert dict(mpl.rcParams) == before
    # a second curve on a ctmc.plot figure gets its sizes; the user's own axes keep the user's
    plot.transient([0, 1], [0.5, 0.6], ax=ax, label="second")
    assert {t.get_fontsize() for t in ax.get_legend().get_texts()} == {8.0}
    from matplotlib.figure import Figure
    own = Figure(figsize=(6, 4)).subplots()
    assert plot.law({0: 1.0}, "n", ax=own) is own
    from matplotlib.font_manager import FontProperties
    user_size = FontProperties(size=mpl.rcParams["axes.labelsize"]).get_size_in_points()
    assert own.xaxis.label.get_fontsize() == user_size
    assert tuple(own.figure.get_size_inches()) == (6, 4)


@pytest.mark.parametrize("name, head", [("f.pdf", b"%PDF-"), ("f.svg", b"<svg"), ("f", b"%PDF-"),
                                        ("sub/f.png", b"\x89PNG\r\n\x1a\n")])
def test_save_writes_the_format_of_the_extension(tmp_path, name, head):
    ax = plot.law({0: 0.5, 1: 0.5}, "n")
    path = plot.save(ax.figure if name == "f" else ax, tmp_path / name)
    data = path.read_bytes()
    assert path.exists() and (data.startswith(head) if head != b"<svg" else head in data[:2000])
    assert path.suffix == (".pdf" if name == "f" else "." + name.rsplit(".", 1)[1])


def test_save_bad_input_names_the_argument(tmp_path):
    ax = plot.law({0: 1.0}, "n")
    with pytest.raises(ValueError, match="^path:.*jpg"):
        plot.save(ax, tmp_path / "f.jpg")
    with pytest.raises(ValueError, match="^fig_or_ax:"):
        plot.save("figure", tmp_path / "f.pdf")
    with pytest.raises(ValueError, match="^dpi:"):
        plot.save(ax, tmp_path / "f.png", dpi=0)


def test_without_matplotlib_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # `import matplotlib` now fails
    with pytest.raises(ImportError, match=r"pip install 'ctmc-exact\[plot\]'"):
        plot.law({0: 1.0})
    with pytest.raises(ImportError, match=r"ctmc-exact\[plot\]"):
        plot.meanfield_error([1, 2], [1.0, 0.5])


def test_import_ctmc_does_not_import_matplotlib():
    code = "import sys, ctmc; ctmc.plot.law; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_sweep_draws_what_ctmc_sweep_returns():
    """The real ``ctmc.sweep`` result (not hand-made rows): values and bars from its records, its
    own columns (states, reused, ...) not taken for parameters (found by review)."""
    def mm1k(K, rho):
        m = ctmc.Model("mm1k")
        n = m.var("n", 0, K)
        m.event("arrival", guard=n < K, rate=rho, update={n: n + 1})
        m.event("service", guard=n > 0, rate=1.0, update={n: n - 1})
        m.label("full", n == K)
        return m
    res = ctmc.sweep(mm1k, {"K": [4, 8], "rho": [0.5, 0.8]}, {"B": "full"}, initial={"n": 0}, jobs=1)
    ax = plot.sweep(res, "rho", y="B", by="K")
    for cont, K in zip(ax.containers, (4, 8)):
        data_line = cont.lines[0]
        closed = [r ** K * (1 - r) / (1 - r ** (K + 1)) for r in (0.5, 0.8)]
        np.testing.assert_allclose(data_line.get_ydata(), closed, rtol=1e-12)
    with pytest.raises(ValueError, match="by"):
        plot.sweep(res, "rho", y="B", by="states")             # a column of the sweep, not a parameter


def test_save_writes_truetype_fonts_and_svg_text(tmp_path):
    """STYLE promises fonts a journal accepts (TrueType in a pdf, text in an svg): they are settings
    read when the file is written, so save applies them (found by review: Type 3 fonts, no text)."""
    ax = plot.law({0: 0.5, 1: 0.25, 2: 0.25})
    pdf = plot.save(ax, tmp_path / "law.pdf").read_bytes()
    assert b"/FontFile2" in pdf and b"/Type3" not in pdf
    svg = plot.save(ax, tmp_path / "law.svg").read_text()
    assert "<text" in svg
