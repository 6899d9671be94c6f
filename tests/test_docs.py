"""The Sphinx documentation builds without a single warning.

``-W --keep-going`` turns every warning (a malformed docstring, a broken
toctree, an unknown directive) into a failure and reports all of them at once.
"""
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, (
        f"sphinx-build failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout[-2000:]}")
    api = (out / "api.html").read_text(encoding="utf-8")
    for name in ("hitting_times", "StationaryResult", "TAIL_INACCURATE"):
        assert name in api, f"{name} missing from the API reference"
    assert "balance_error" in (out / "guide.html").read_text(encoding="utf-8")
