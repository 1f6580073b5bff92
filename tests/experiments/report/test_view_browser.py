"""``view.html`` in a real browser (headless Chromium from Debian's packages, driven by Selenium):
overview -> a cell -> a flip -> an example, kept spans and gold marks checked against the run's traces,
and markup in a prediction shown as text without running.  Screenshots go to the test's tmp folder."""
from __future__ import annotations

import pytest

from experiments.cli.view import load_contexts
from experiments.view.page import write_view
from testkit.browser import BrowserUnavailable, headless_chromium
from tests.support.view_run import PAYLOAD, examples, kept_texts, lines, make_run

pytestmark = pytest.mark.slow  # a headless Chromium

TEXTS = """return Array.from(document.querySelectorAll(arguments[0])).map(n => [n.getAttribute(arguments[1]), n.textContent]);"""


@pytest.fixture(scope="module")
def browser():
    try:
        driver = headless_chromium()
    except BrowserUnavailable as err:
        pytest.skip(str(err))
    yield driver
    driver.quit()


def _wait(driver, condition, what: str, timeout: float = 10):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: condition(d), message=f"waited for {what}")


def _css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def _grouped(driver, selector, attr) -> list[str]:
    groups: dict[str, str] = {}
    for key, text in driver.execute_script(TEXTS, selector, attr):
        groups[key] = groups.get(key, "") + text
    return list(groups.values())


def _view(driver, name: str):
    _wait(driver, lambda d: d.execute_script("return document.body.getAttribute('data-view')") == name, name)


def test_overview_cell_flip_example_in_a_browser(tmp_path, browser):
    run = make_run(tmp_path / "run")
    page = write_view(run, contexts=load_contexts)
    browser.get(page.resolve().as_uri())
    _view(browser, "overview")
    meta = browser.execute_script("return JSON.parse(document.getElementById('meta').textContent)")
    assert "Scores" in browser.find_element("tag name", "main").text
    assert len(_css(browser, "figure img")) == len(meta["plots"]) == 2
    browser.save_screenshot(str(tmp_path / "1-overview.png"))

    # overview -> the retrieval arm's cell: its examples
    ret = next(i for i, c in enumerate(meta["cells"]) if c["arm"].startswith("retrieval"))
    _css(browser, f'td.cell-link[data-cell="{ret}"]')[0].click()
    _view(browser, "browse")
    assert len(_css(browser, "tr.row")) == meta["cells"][ret]["n"] == 10
    assert all(r.get_attribute("data-cell") == str(ret) for r in _css(browser, "tr.row"))
    browser.save_screenshot(str(tmp_path / "2-cell.png"))

    # overview -> the flips of an arm that lost answers the full context had
    _css(browser, "#nav-overview")[0].click()
    _view(browser, "overview")
    link = next(a for a in _css(browser, 'a.flip-link[data-flip="lost"]') if a.text != "0")
    n_lost = int(link.text)
    link.click()
    _view(browser, "browse")
    rows = _css(browser, "tr.row")
    assert len(rows) == n_lost and all(r.find_elements("css selector", "td")[5].text == "lost" for r in rows)
    browser.save_screenshot(str(tmp_path / "3-flips.png"))

    # a flip -> the example, every arm side by side; highlight the retrieval arm's kept text
    ex_id = rows[0].get_attribute("data-example")
    rows[0].click()
    _view(browser, "example")
    labels = [lab for lab in _css(browser, ".picker label") if "retrieval" in lab.text]  # few arms: radio buttons
    assert len(labels) == 1
    if not labels[0].find_element("css selector", "input").is_selected():
        labels[0].find_element("css selector", "input").click()
        _wait(browser, lambda d: "arm=" in d.current_url, "the retrieval arm's highlight")
    assert len(_css(browser, "article.arm")) == 3
    trace = next(t for t in lines(run, "traces.jsonl") if t["id"] == ex_id and t["config_hash"] == meta["cells"][ret]["hash"])
    example = examples()[ex_id]
    kept = [t.strip() for t in _grouped(browser, "#context mark.kept", "data-span")]
    assert kept == kept_texts(example, trace["kept_chunks"]) and kept
    ranked_kept = [t for _, t in browser.execute_script(TEXTS, "article.arm.chosen tr.kept-row td:nth-child(2)", "class")]
    assert ranked_kept == [u for u, _ in trace["trace"]["ranking"] if u in trace["kept_chunks"]]
    gold = _grouped(browser, "#context mark.gold", "data-occ")
    answers = [a.lower() for a in example.answers]
    assert gold and all(g.lower() in answers for g in gold)
    assert len(gold) == sum(example.context.lower().count(a) for a in answers)
    browser.save_screenshot(str(tmp_path / "4-example.png"))

    # markup in a prediction stays text: found by free-text search, shown literally, nothing runs
    browser.get(page.resolve().as_uri() + "#/browse?task=nq_multidoc&q=__xss")
    _view(browser, "browse")
    (row,) = _css(browser, "tr.row")
    assert row.find_elements("css selector", "td")[7].get_attribute("textContent") == PAYLOAD
    row.click()
    _view(browser, "example")
    shown = [t for _, t in browser.execute_script(TEXTS, "pre.prediction", "class")]
    assert PAYLOAD in shown
    assert browser.execute_script("return window.__xss") is None
    assert browser.execute_script("return document.querySelectorAll('img[src=\"x\"], svg[onload], main script').length") == 0
    assert browser.execute_script("return document.querySelectorAll('script:not([type])').length") == 1
    browser.save_screenshot(str(tmp_path / "5-markup-as-text.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors
    assert all((tmp_path / f).stat().st_size > 10_000 for f in ("1-overview.png", "4-example.png"))


def _errors_on_page(driver) -> list[str]:
    """The page's own render errors and the console's severe ones (a failed arm's card is not one)."""
    return [e.text for e in _css(driver, "#app > p.error")] + [e["message"] for e in driver.get_log("browser")
                                                           if e["level"] == "SEVERE"]


def test_every_example_of_every_compressor_opens_in_a_browser(tmp_path, browser, all_arms_run):
    page = write_view(all_arms_run, out=tmp_path / "all.html", contexts=load_contexts)
    browser.get(page.resolve().as_uri())
    _view(browser, "overview")
    meta = browser.execute_script("return JSON.parse(document.getElementById('meta').textContent)")
    (task,) = meta["tasks"]
    blocks = browser.execute_script("const t = JSON.parse(document.getElementById(arguments[0]).textContent);"
                                    "return t.examples.map(e => JSON.parse(document.getElementById(e.block).textContent));",
                                    task["block"])
    kinds, ranked = set(), set()
    for j, block in enumerate(blocks):
        browser.get(page.resolve().as_uri() + f"#/example?task={task['name']}&ex={j}")
        _view(browser, "example")
        cards = _css(browser, "article.arm")
        assert len(cards) == len(block["arms"]) == len(meta["cells"])  # every arm, scored or failed
        for card, arm in zip(cards, block["arms"]):
            kinds.add(arm["kind"])
            if "ranking" in arm:  # retrieval (both orders, hybrid, rerank), top_k and longllmlingua
                ranked.add(arm["kind"])
                rows = card.find_elements("css selector", "table.ranking tbody tr")
                assert len(rows) == len(block["rankings"][arm["ranking"]]) > 0
        for i, arm in enumerate(block["arms"]):  # highlight each arm that kept a part of the context
            if arm.get("kept") and arm["kind"] != "full":
                browser.get(page.resolve().as_uri() + f"#/example?task={task['name']}&ex={j}&arm={i}")
                _view(browser, "example")
                assert _css(browser, "#context mark.kept") or _css(browser, "#context .summary-text")
        assert not _errors_on_page(browser)
    assert kinds == {"full", "truncate", "retrieval", "summarize", "longllmlingua", "top_k"}
    assert ranked == {"retrieval", "top_k", "longllmlingua"}  # LongLLMLingua's document ranking is a table too
    browser.save_screenshot(str(tmp_path / "all-arms.png"))


def test_cut_examples_are_marked_in_a_browser(tmp_path, browser, cut_run):
    page = write_view(cut_run, out=tmp_path / "cut.html", contexts=load_contexts)
    browser.get(page.resolve().as_uri() + "#/browse?task=nq_multidoc&status=cut")
    _view(browser, "browse")
    rows = _css(browser, "tr.row")
    assert len(rows) == 4 and all("cut" in r.get_attribute("class").split() for r in rows)
    assert all(r.find_elements("css selector", "td")[1].text == "full" for r in rows)
    assert all(r.find_elements("css selector", "td.cut-mark")[0].text == "✂ cut" for r in rows)
    rows[0].click()
    _view(browser, "example")
    cut_cards = _css(browser, "article.arm.cut")
    assert len(cut_cards) == 1 and "full" in cut_cards[0].find_element("css selector", "h4").text
    assert "cut by the reader's window: it saw" in cut_cards[0].find_element("css selector", "p.cut").text
    assert not _errors_on_page(browser)
    browser.save_screenshot(str(tmp_path / "cut.png"))
