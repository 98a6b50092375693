import re
from pathlib import Path

import pytest

from dashboards import build_report
from dashboards.report import HISTORY_DIV_ID, KFOLD_DIV_ID, PARALLEL_DIV_ID
from ludwig_hpo.results import ParamInfo

PLOTLY_JS_MARKER = "* plotly.js v"  # the licence banner at the top of the bundle
EVIL = "<script>alert(1)</script>"
EVIL_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def build(result, tmp_path: Path) -> str:
    path = build_report(result, tmp_path / "out" / "report.html", tmp_path / "out" / "hiplot.html")
    assert path == tmp_path / "out" / "report.html"
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def report(sweep, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build(sweep, out), out / "out"


def test_page_embeds_plotly_once_and_has_every_figure(report):
    page, out = report
    assert page.count(PLOTLY_JS_MARKER) == 1
    assert not re.search(r"<script[^>]*\bsrc=", page)  # nothing fetched: works offline
    for div_id in (PARALLEL_DIV_ID, HISTORY_DIV_ID, KFOLD_DIV_ID):
        assert f'id="{div_id}"' in page
    assert 'href="hiplot.html"' in page and 'src="hiplot.html"' in page
    assert sorted(p.name for p in out.iterdir()) == ["hiplot.html", "report.html"]


def test_header_and_tables(report):
    page, _ = report
    assert "digits-cnn" in page and "validation/label/loss (minimize)" in page
    assert "1 h 02 min 05 s" in page
    assert "15 completed" in page and "3 stopped early" in page and "2 failed" in page
    assert "--set trainer.learning_rate=" in page  # best trial's configuration as --set overrides
    assert "fold mean" in page and "95 % CI" in page and "config #3" in page
    assert "Selection optimism" in page and "paired t-test p =" in page
    assert "RuntimeError: boom" in page  # failed trials' errors


def test_user_strings_appear_only_escaped(tmp_path, make_trial, make_sweep):
    p = ParamInfo("model.act", "choice", categories=(EVIL, "relu"))
    trials = [make_trial("t0", {p.path: EVIL}, 0.1), make_trial("t1", {p.path: "relu"}, 0.2)]
    page = build(make_sweep(trials, parameters=[p], name=EVIL), tmp_path)
    assert EVIL not in page
    assert f"<title>{EVIL_ESCAPED}" in page and f"<h1>{EVIL_ESCAPED}</h1>" in page
    assert "--set &#39;model.act=&lt;script&gt;alert(1)&lt;/script&gt;&#39;" in page  # best trial t0's configuration
    assert EVIL not in (tmp_path / "out" / "hiplot.html").read_text(encoding="utf-8")


def test_one_trial_without_kfold(tmp_path, make_trial, make_sweep, params):
    page = build(make_sweep([make_trial("t0", {params[0].path: 1e-3}, 0.4)]), tmp_path)
    assert page.count(PLOTLY_JS_MARKER) == 1
    assert f'id="{KFOLD_DIV_ID}"' not in page
    assert "k-fold re-evaluation was not run" in page


def test_all_failed(tmp_path, make_trial, make_sweep, params):
    trials = [make_trial(f"t{i}", {params[0].path: 1e-3}, None, status="FAILED") for i in range(2)]
    page = build(make_sweep(trials), tmp_path)
    assert page.count(PLOTLY_JS_MARKER) == 1
    assert "No trial finished with a metric" in page
    assert "No trial reported a metric" in page


def test_failed_write_leaves_no_temp_file(tmp_path, make_trial, make_sweep, params, monkeypatch):
    import dashboards._write as write

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(write.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        build_report(make_sweep([make_trial("t0", {}, 0.4)]), tmp_path / "report.html", tmp_path / "hiplot.html")
    assert list(tmp_path.iterdir()) == []
