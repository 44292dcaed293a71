"""The web table builder of ``protab serve`` in a real browser (Debian's chromium driven by selenium).

Against the real server of tests/serve/serve_fixtures.py: the page loads (offline, labelled), a token
lists its datasets, a table request renders the same cells as the API answer for the same request,
the CSV download is the API's CSV, and the API's refusals (401, 403, the minimum-population rule)
are shown.
"""

import os
import re
from decimal import ROUND_HALF_UP, Decimal

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait
from serve_fixtures import served  # noqa: F401

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(
        f"the browser test needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}); "
        "`make test` installs them as root",
        allow_module_level=True,
    )

BLANK = "\u2014"  # how the page shows a blanked cell (null in the API answer)
WAIT = 20


@pytest.fixture(scope="module")
def server(request):
    """The real service (tests/serve/serve_fixtures.py): url, token (alice's), tokens of every user, dataset."""
    return request.getfixturevalue("served")


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    """Headless chromium through /usr/bin/chromedriver (no selenium-manager lookup or download)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--lang=en-US"):
            options.add_argument(arg)
        options.add_experimental_option(
            "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
        )
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _api(server, path, body=None, token=None):
    headers = {"Authorization": f"Bearer {token or server['token']}"}
    if body is None:
        return httpx.get(server["url"] + path, headers=headers, timeout=30)
    return httpx.post(server["url"] + path, json=body, headers=headers, timeout=30)


def _wait(driver, condition):
    return WebDriverWait(driver, WAIT).until(condition)


def _open(driver, server):
    driver.get(server["url"] + "/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(server["url"] + "/")
    _wait(driver, EC.visibility_of_element_located((By.ID, "token")))


def _sign_in(driver, server, token):
    _open(driver, server)
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "signin-button").click()


def _signed_in(driver, server, token=None):
    _sign_in(driver, server, token or server["token"])
    _wait(driver, EC.visibility_of_element_located((By.ID, "builder")))


def _error_text(driver):
    box = _wait(driver, EC.visibility_of_element_located((By.ID, "error")))
    return _wait(driver, lambda d: box.text.strip())


def _choose(driver, dataset, dims, levels=None, filters=None, measure=None):
    """Pick a dataset, tick dimensions, choose levels, type filters (codes separated by commas), pick a measure."""
    Select(driver.find_element(By.ID, "dataset")).select_by_value(dataset)
    for row in driver.find_elements(By.CSS_SELECTOR, "#dims tbody tr"):
        dim = row.get_attribute("data-dim")
        if dim in dims:
            row.find_element(By.CSS_SELECTOR, ".dim-pick").click()
        if levels and dim in levels:
            Select(row.find_element(By.CSS_SELECTOR, ".dim-level")).select_by_value(levels[dim])
        if filters and dim in filters:
            row.find_element(By.CSS_SELECTOR, ".dim-filter").send_keys(", ".join(filters[dim]))
    if measure:
        Select(driver.find_element(By.ID, "measure")).select_by_value(measure)


def _kind(column, request) -> str:
    """What an answer column holds: a dimension's codes, its level, the count, a sum or a mean."""
    if column in request["dims"]:
        return "code"
    if column.endswith("_level") and column[:-6] in request["dims"]:
        return "level"
    return {"n_pert": "count"}.get(column, "mean" if column.endswith("_mean_pert") else "sum")


def _header(column, request) -> str:
    """The page's heading of an answer column: a dimension shown at a chosen level is named by it."""
    levels = request.get("levels", {})
    kind = _kind(column, request)
    if kind == "code":
        return levels.get(column, column)
    if kind == "level":
        return "level of " + levels.get(column[:-6], column[:-6])
    return {"count": "count", "mean": f"mean {column[:-10]}", "sum": f"sum {column[:-5]}"}[kind]


def _shown(value, kind="code") -> str:
    """The text the page shows for one value (en-US): counts whole, sums and means with thousands
    separators and 0 decimals from 1000, 1 from 100, else 2; codes and levels as they are."""
    if value is None:
        return BLANK
    if kind in ("code", "level") or isinstance(value, str):
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    size = abs(value)
    decimals = 0 if kind == "count" or size >= 1000 else 1 if size >= 100 else 2
    exact = Decimal(value).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP)  # JavaScript's halfExpand
    return f"{exact:,.{decimals}f}"


def _show_and_compare(driver, server, token, expected_request):
    """Click "Show table"; the page's cells must be the API's answer to the same request, cell for cell."""
    request = driver.execute_script("return tableRequest()")
    assert request == expected_request
    driver.find_element(By.ID, "show").click()
    table = _wait(driver, EC.visibility_of_element_located((By.ID, "result")))
    answer = _api(server, "/v1/table", request, token=token)
    assert answer.status_code == 200, answer.text
    answer = answer.json()
    header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    # one script call for all cells (a WebDriver round trip per cell is slow)
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#result tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))"
    )
    assert header == [_header(c, request) for c in answer["columns"]]
    assert len(cells) == len(answer["rows"]) > 1
    kinds = [_kind(c, request) for c in answer["columns"]]
    assert cells == [[_shown(v, k) for v, k in zip(row, kinds)] for row in answer["rows"]]
    blanks = driver.execute_script("return document.querySelectorAll('#result td.blank').length")
    assert blanks == sum(v is None for row in answer["rows"] for v in row)
    assert not driver.find_element(By.ID, "error").is_displayed()
    return answer


def test_page_loads_offline_with_labels(browser, server):
    _open(browser, server)
    assert "table builder" in browser.title
    assert not browser.find_element(By.ID, "builder").is_displayed()
    # every resource the page loaded came from the server itself (no CDN: the page works offline)
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(r.startswith(server["url"] + "/static/") for r in resources), resources
    # every form control has an accessible label
    unlabelled = browser.execute_script(
        "return [...document.querySelectorAll('input, select')].filter(e => !(e.labels.length"
        " || e.getAttribute('aria-label'))).map(e => e.id || e.className)"
    )
    assert unlabelled == []


def test_sign_in_lists_the_datasets_of_the_token(browser, server):
    _signed_in(browser, server)
    catalog = _api(server, "/v1/catalog").json()
    shown = [o.get_attribute("value") for o in Select(browser.find_element(By.ID, "dataset")).options]
    assert shown == [d["name"] for d in catalog["datasets"]] and server["dataset"] in shown
    # the dimensions offered are those of the catalogue (alice may not use 'age')
    Select(browser.find_element(By.ID, "dataset")).select_by_value(server["dataset"])
    dims = [r.get_attribute("data-dim") for r in browser.find_elements(By.CSS_SELECTOR, "#dims tbody tr")]
    (persons,) = [d for d in catalog["datasets"] if d["name"] == server["dataset"]]
    assert dims == [d["name"] for d in persons["dims"]] and server["forbidden_dim"] not in dims
    # the token is kept for the tab only, never in the address
    assert browser.execute_script("return sessionStorage.getItem('protab.token')") == server["token"]
    assert server["token"] not in browser.current_url
    assert not browser.find_element(By.ID, "error").is_displayed()


def test_table_with_level_filter_and_measure_is_the_api_answer(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["municipality", "sex"], levels={"municipality": "municipality"},
            filters={"agegroup": ["a5-9"]}, measure="income")
    expected = {"dataset": server["dataset"], "dims": ["municipality", "sex"], "levels": {"municipality": "municipality"},
                "filters": {"agegroup": "a5-9"}, "measure": "income"}
    answer = _show_and_compare(browser, server, server["token"], expected)
    assert {"n_pert", "income_pert"} <= set(answer["columns"])


def test_blanked_cells_are_shown_as_such(browser, server):
    # bob may tabulate single years of age; exactly one person is 19 years old, so some cells are blanked
    bob = server["tokens"]["bob"]
    _signed_in(browser, server, bob)
    _choose(browser, server["dataset"], ["region", "age"])
    answer = _show_and_compare(browser, server, bob, {"dataset": server["dataset"], "dims": ["region", "age"]})
    assert any(v is None for row in answer["rows"] for v in row)


def test_csv_download_is_the_api_csv(browser, server, downloads):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["region", "sex"])
    request = browser.execute_script("return tableRequest()")
    for f in downloads.iterdir():
        f.unlink()
    browser.find_element(By.ID, "download").click()
    _wait(browser, lambda d: [f for f in downloads.iterdir() if f.suffix == ".csv"])
    (saved,) = [f for f in downloads.iterdir() if f.suffix == ".csv"]
    expected = _api(server, "/v1/table?format=csv", request)
    assert expected.status_code == 200 and expected.content.count(b"\n") > 2
    assert saved.read_bytes() == expected.content


@pytest.mark.parametrize("token", ["not-a-token", "alice_expired"])
def test_refused_token_shows_the_message(browser, server, token):
    token = server["tokens"].get(token, token)
    _sign_in(browser, server, token)
    refusal = _api(server, "/v1/catalog", token=token)
    assert refusal.status_code == 401
    assert refusal.json()["error"] in _error_text(browser)
    assert not browser.find_element(By.ID, "builder").is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('protab.token')") is None


def test_filter_refused_by_the_minimum_population_rule_shows_the_message(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["sex"], filters={"municipality": ["R9-9"]})
    request = browser.execute_script("return tableRequest()")
    browser.find_element(By.ID, "show").click()
    refusal = _api(server, "/v1/table", request)
    assert refusal.status_code == 400
    assert "minimum-population" in refusal.json()["error"]
    assert refusal.json()["error"] in _error_text(browser)
    assert not browser.find_element(By.ID, "result").is_displayed()


def test_forbidden_dimension_shows_the_message(browser, server):
    # bob's page offers 'age'; the request is sent with alice's token (rights narrowed while the page was open)
    _signed_in(browser, server, server["tokens"]["bob"])
    _choose(browser, server["dataset"], [server["forbidden_dim"]])
    browser.execute_script("sessionStorage.setItem('protab.token', arguments[0])", server["token"])
    browser.find_element(By.ID, "show").click()
    refusal = _api(server, "/v1/table", browser.execute_script("return tableRequest()"))
    assert refusal.status_code == 403
    assert refusal.json()["error"] in _error_text(browser)
    assert not browser.find_element(By.ID, "result").is_displayed()


def test_level_heading_number_format_and_filters_in_the_caption(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["municipality"], levels={"municipality": "region"},
            filters={"sex": ["F"]}, measure="income")
    expected = {"dataset": server["dataset"], "dims": ["municipality"], "levels": {"municipality": "region"},
                "filters": {"sex": "F"}, "measure": "income"}
    answer = _show_and_compare(browser, server, server["token"], expected)
    table = browser.find_element(By.ID, "result")
    header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert header[0] == "region" and "municipality" not in header
    assert "filters: sex = F" in table.find_element(By.TAG_NAME, "caption").text
    # sums of income are in the hundreds of thousands: shown whole, with thousands separators
    sums = browser.execute_script(
        "return [...document.querySelectorAll('#result tbody tr')].map(tr => tr.cells[3].textContent)")
    assert answer["columns"][3] == "income_pert"
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})+", s) for s in sums), sums
