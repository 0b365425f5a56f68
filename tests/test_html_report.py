"""`ave audit --html`: the static report as a user sees it — opened from a file:// URL in headless
Chromium, its rows and filters checked through the DOM, a screenshot taken; untrusted text stays
text; the same report gives the same bytes."""
from __future__ import annotations

import shutil

import pytest
from browser import Browser, skip_reason
from conftest import EXAMPLES
from test_draw import hostile_copy

from ave_decl.draw.html_report import report_html
from ave_decl.pipeline import Options, read_sources, run


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A small corpus (the violating example under a hostile name, a verified kernel, a file with a
    front-end error) audited into DIR/index.html by the real command."""
    from click.testing import CliRunner

    from ave_decl.cli import main

    root = tmp_path_factory.mktemp("corpus")
    corpus = root / "kernels"
    corpus.mkdir()
    hostile_copy(corpus)
    shutil.copy(EXAMPLES / "gemm_naive.ave", corpus)
    (corpus / "broken.ave").write_text("@kernel(grid=(1,), block=64)\ndef k(:\n")
    out = root / "report"
    r = CliRunner().invoke(main, ["audit", str(corpus), "--html", str(out), "--no-cache", "-j", "1", "-q"],
                           catch_exceptions=False)
    assert r.exit_code == 3, r.output  # the front-end error decides the exit code
    return out / "index.html"


@pytest.fixture(scope="module")
def browser():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    b = Browser(1400, 1000)
    yield b
    b.close()


def _visible(driver, selector: str) -> int:
    return len([e for e in driver.find_elements("css selector", selector) if e.is_displayed()])


def test_report_renders_in_a_headless_browser(audited, browser, tmp_path):
    browser.open(audited)
    d = browser.driver
    assert d.title == "Ave audit report"
    assert _visible(d, "tr.kernel-row") == 3  # two kernels and the unreadable file
    verdicts = sorted(e.get_attribute("data-verdict") for e in d.find_elements("css selector", "tr.kernel-row"))
    assert verdicts == ["ERROR", "VERIFIED", "VIOLATION"]
    assert _visible(d, "article.finding") == 7
    heatmap = d.find_element("css selector", "article.finding[data-number='1'] figure.heatmap svg")
    assert heatmap.size["height"] > 500 and heatmap.size["width"] > 100  # laid out, not an empty box
    assert len(d.find_elements("css selector", "article.finding[data-number='1'] rect.cell.violating")) == 256
    steps = d.find_elements("css selector", "article.finding[data-number='1'] li.chain-step")
    assert len(steps) == 12 and steps[0].text.startswith("use at ")
    shot = tmp_path / "report.png"
    assert d.save_screenshot(str(shot)) and shot.read_bytes().startswith(b"\x89PNG")


def test_filters_work_in_the_browser(audited, browser):
    browser.open(audited)
    d = browser.driver
    d.find_element("css selector", ".verdict-filter[value='VIOLATION']").click()
    assert _visible(d, "tr.kernel-row") == 2 and _visible(d, "article.finding") == 0
    assert d.find_element("id", "shown").text == "2 row(s), 0 finding(s) shown"
    d.find_element("css selector", ".verdict-filter[value='VIOLATION']").click()
    from selenium.webdriver.support.ui import Select

    Select(d.find_element("id", "invariant-filter")).select_by_value("ave/bank-conflicts")
    assert _visible(d, "article.finding") == 4 and _visible(d, "tr.kernel-row") == 1
    Select(d.find_element("id", "invariant-filter")).select_by_value("")
    d.find_element("id", "warnings-filter").click()  # errors only
    shown = [e for e in d.find_elements("css selector", "article.finding") if e.is_displayed()]
    assert [e.get_attribute("data-invariant") for e in shown] == ["ave/mma-k-pairing"]


def test_untrusted_text_stays_text_in_the_browser(audited, browser):
    browser.open(audited)
    d = browser.driver
    assert len(d.find_elements("tag name", "script")) == 1  # the report's own filter script only
    snippet = d.find_element("css selector", "article.finding[data-number='1'] pre.snippet").text
    assert "# <script>alert('x')</script> & \"q\"" in snippet
    assert "k<script>.ave" in d.find_element("css selector", "tr.kernel-row[data-verdict='VIOLATION']").text


def test_no_external_assets_and_same_bytes(audited, tmp_path):
    page = audited.read_text()
    for ref in ("http://", "https://", "src=", "<link"):
        assert ref not in page.replace('xmlns="http://www.w3.org/2000/svg"', ""), ref
    assert "\x01" not in page and "\x1b" not in page and "\ufffd\ufffd[31m" in page  # the hostile comment's
    sources, errors = read_sources([str(EXAMPLES / "gemm_lds_mfma_transposed.ave")])
    report = run(sources, Options(violation_sets=True), errors)
    first = report_html(report)
    for k in report.kernels:  # measured times differ from run to run: the page never shows them
        k.timings_ms = {name: ms * 7 + 1 for name, ms in k.timings_ms.items()}
        for f in k.findings:
            f.solver_ms += 123.0
    assert report_html(report) == first


def test_an_unwritable_report_is_one_line_and_exit_2(ave, tmp_path):
    """--html where DIR/index.html is a directory, DIR is a file (click refuses it) or under /proc:
    one line, exit 2, no traceback."""
    corpus = tmp_path / "kernels"
    corpus.mkdir()
    (corpus / "broken.ave").write_text("@kernel(grid=(1,), block=64)\ndef k(:\n")  # fast: fails to parse
    (tmp_path / "taken" / "index.html").mkdir(parents=True)
    (tmp_path / "a-file").write_text("")
    for target, message in ((tmp_path / "taken", "is a directory"), (tmp_path / "a-file", "is a file"),
                            ("/proc/ave-report", "cannot create /proc/ave-report")):
        r = ave("audit", corpus, "--html", target, "--no-cache", "-j", "1", "-q")
        assert r.code == 2 and message in r.err and "Traceback" not in r.err, r.err
        assert len([line for line in r.err.splitlines() if "rror" in line]) == 1, r.err


def test_a_timed_out_file_is_one_unknown_row():
    """An audit file past --file-timeout: one UNKNOWN row that says why, counted once (no ERROR)."""
    from ave_decl.audit.batch import _failed
    from ave_decl.report.model import Report

    kernels, errors = _failed("slow.ave", "timeout", "no verdict within 0.5 s per file")
    html = report_html(Report(kernels=kernels, errors=errors))
    assert "UNKNOWN (1)" in html and "ERROR (0)" in html
    assert html.count('data-verdict="UNKNOWN"') == 1 and 'data-verdict="ERROR"' not in html
    assert "no verdict within 0.5 s per file" in html
