"""The web table builder of ``protab serve`` in a real browser (Debian's chromium driven by selenium).

Against the real server of tests/serve/serve_fixtures.py (and one of a 1 km grid dataset): the page
loads (offline, every control labelled, usable from the keyboard), a token lists its datasets, the
answer is laid out as a crosstab (each cell where its codes say, the published margins at the
edges, wafers as separate captioned tables, blanked cells marked and explained in a legend), the
list view holds the API's cells one for one, a one-dimension table draws as bars and a grid
dataset as a map of its squares, the CSV download is the API's CSV, and the API's refusals (401,
403, the minimum-population rule) are shown in the alert. Each state is saved as a PNG in
build/screenshots/ (kept after the run, for a person to look at; nothing asserts on pixels).
"""

import hashlib
import re
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import browser_fixtures  # skips this module without chromium
import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait
from serve_fixtures import Server, served  # noqa: F401

import protab as pt

BLANK = "x"  # how the page shows a blanked cell (null in the API answer)
browser, downloads = browser_fixtures.browser, browser_fixtures.downloads  # the fixtures, module-scoped
WAIT = 20
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"  # /build/ is in .gitignore


@pytest.fixture(scope="module")
def server(request):
    """The real service (tests/serve/serve_fixtures.py): url, token (alice's), tokens of every user, dataset."""
    return request.getfixturevalue("served")


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


def _console_errors(driver):
    """The errors of the page's console since the last call (script errors, Content-Security-Policy
    refusals)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _screenshot(driver, name):
    """The whole page as build/screenshots/<name>.png (for a person to look at)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height + 40, 800), 6000))
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def _choose(driver, dataset, dims, levels=None, filters=None, measure=None, places=None):
    """Pick a dataset, tick dimensions (in the order given), place them (rows, cols, wafers),
    choose levels, type filters (codes separated by commas), pick a measure."""
    Select(driver.find_element(By.ID, "dataset")).select_by_value(dataset)
    rows = {r.get_attribute("data-dim"): r for r in driver.find_elements(By.CSS_SELECTOR, "#dims tbody tr")}
    for dim in dims:
        rows[dim].find_element(By.CSS_SELECTOR, ".dim-pick").click()
    for dim, row in rows.items():
        if places and dim in places:
            Select(row.find_element(By.CSS_SELECTOR, ".dim-place")).select_by_value(places[dim])
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


def _show(driver):
    """Click "Show table" and wait for the answer (the page marks it aria-busy until it is drawn)."""
    driver.find_element(By.ID, "show").click()
    _wait(driver, lambda d: d.find_element(By.ID, "answer").get_attribute("aria-busy") is None)
    return _wait(driver, EC.visibility_of_element_located((By.ID, "answer")))


def _view(driver, view, value=None):
    Select(driver.find_element(By.ID, "view")).select_by_value(view)
    if value:
        Select(driver.find_element(By.ID, "value")).select_by_value(value)


def _cells(answer, request):
    """The answer's rows by their dimensions' codes: {(code, ...): {column: value}}."""
    at = [answer["columns"].index(d) for d in request["dims"]]
    return {tuple(row[i] for i in at): dict(zip(answer["columns"], row)) for row in answer["rows"]}


def _crosstabs(driver):
    """Each drawn crosstab: caption, column keys (header rows expanded by colspan, the stub cut
    off), and per body row its heading codes and cell texts and classes."""
    tables = driver.execute_script(
        "return [...document.querySelectorAll('#crosstab table.crosstab')].map(t => ({caption: t.caption.textContent,"
        " head: [...t.tHead.rows].map(tr => [...tr.cells].map(c => [c.textContent, c.colSpan, c.className])),"
        " body: [...t.tBodies[0].rows].map(tr => ({cls: tr.className,"
        "  heads: [...tr.querySelectorAll('th')].map(th => th.textContent),"
        "  cells: [...tr.querySelectorAll('td')].map(td => [td.textContent, td.className])}))}))")
    for t in tables:
        stubs = len(t["body"][0]["heads"])
        expanded = []
        for row in t["head"]:
            flat = [text for text, span, _ in row for _ in range(span)]
            expanded.append(flat[stubs:])
        t["cols"] = list(zip(*expanded))
    return tables


def _check_crosstab(table, cells, request, places, column, wafer=()):
    """Every cell of a drawn crosstab is the answer's cell of its row and column codes (and wafer)."""
    kind = _kind(column, request)
    rows = [d for d in request["dims"] if places[d] == "rows"]
    cols = [d for d in request["dims"] if places[d] == "cols"]
    for line in table["body"]:
        for key, (text, cls) in zip(table["cols"], line["cells"]):
            codes = dict(zip(rows, line["heads"])) | dict(zip(cols, key)) | dict(wafer)
            cell = cells[tuple(codes[d] for d in request["dims"])]
            assert text == _shown(cell[column], kind), (codes, text)
            assert ("blank" in cls) == (cell[column] is None)


def test_page_loads_offline_with_labels(browser, server):
    _open(browser, server)
    assert "table builder" in browser.title
    assert not browser.find_element(By.ID, "builder").is_displayed()
    # every resource the page loaded came from the server itself (no CDN: the page works offline)
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(r.startswith(server["url"] + "/static/") for r in resources), resources
    _screenshot(browser, "01-sign-in")
    # signed in, every form control (also those made per dimension) has a <label for> it
    _signed_in(browser, server)
    unlabelled = browser.execute_script(
        "return [...document.querySelectorAll('input, select, button')].filter(e => !(e.labels && e.labels.length)"
        " && e.tagName !== 'BUTTON').map(e => e.id || e.className)"
    )
    assert unlabelled == []
    assert browser.execute_script("return document.querySelectorAll('[tabindex]:not([tabindex=\"0\"])').length") == 0
    _screenshot(browser, "02-empty-builder")


def test_keyboard_alone_builds_a_crosstab(browser, server):
    _signed_in(browser, server)
    Select(browser.find_element(By.ID, "dataset")).select_by_value(server["dataset"])
    browser.execute_script("document.getElementById('dataset').focus()")
    order = browser.execute_script(
        "return [...document.querySelectorAll('#request input, #request select, #request button')]"
        ".filter(e => !e.disabled).map(e => e.id)")
    # Tab walks the form in its visual order: dataset, then per dimension its tick, (place,) level, filter
    seen = []
    for _ in order[1:]:
        browser.switch_to.active_element.send_keys(Keys.TAB)
        seen.append(browser.switch_to.active_element.get_attribute("id"))
    assert seen == order[1:]
    # tick region and sex with the space bar; sex goes to the columns by itself; Enter in a filter sends
    for dim in ("region", "sex"):
        row = browser.find_element(By.CSS_SELECTOR, f"#dims tr[data-dim='{dim}']")
        row.find_element(By.CSS_SELECTOR, ".dim-pick").send_keys(Keys.SPACE)
    places = browser.execute_script("return chosenPlaces()")
    assert places == {"region": "rows", "sex": "cols"}
    browser.find_element(By.CSS_SELECTOR, "#dims tr[data-dim='agegroup'] .dim-filter").send_keys(Keys.ENTER)
    _wait(browser, EC.visibility_of_element_located((By.ID, "answer")))
    (table,) = _crosstabs(browser)
    assert table["cols"] == [("F",), ("M",), ("Total",)]


def test_crosstab_places_each_cell_with_totals_at_the_edges(browser, server):
    _signed_in(browser, server)
    _console_errors(browser)
    places = {"municipality": "rows", "sex": "cols"}
    _choose(browser, server["dataset"], ["municipality", "sex"], levels={"municipality": "region"}, measure="income")
    request = browser.execute_script("return tableRequest()")
    _show(browser)
    answer = _api(server, "/v1/table", request).json()
    cells = _cells(answer, request)
    (table,) = _crosstabs(browser)
    # regions down the side, sexes across, the published margins last on both edges
    assert [line["heads"] for line in table["body"]] == [["R1"], ["R2"], ["R3"], ["Total"]]
    assert table["cols"] == [("F",), ("M",), ("Total",)]
    assert table["body"][-1]["cls"] == "total" and all("total" in line["cells"][-1][1] for line in table["body"])
    _check_crosstab(table, cells, request, places, "n_pert")
    assert table["body"][-1]["cells"][-1][0] == _shown(cells[("Total", "Total")]["n_pert"], "count")
    assert [text for text, _, _ in table["head"][0]][:1] == ["region"]  # the stub named by the chosen level
    legend = browser.find_element(By.ID, "legend").text
    assert BLANK in legend and "blanked" in legend and "Total" in legend and "margin" in legend
    _screenshot(browser, "03-crosstab")
    # the mean of income, in the same places, without asking the service again
    asked = browser.execute_script("return performance.getEntriesByType('resource').length")
    _view(browser, "crosstab", "income_mean_pert")
    (table,) = _crosstabs(browser)
    _check_crosstab(table, cells, request, places, "income_mean_pert")
    assert table["caption"].startswith("mean income \u2014 persons by municipality (region level)")
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == asked
    assert _console_errors(browser) == []  # no script error, nothing the page's CSP refused


def test_wafers_are_captioned_tables_and_places_change_without_a_request(browser, server):
    _signed_in(browser, server)
    places = {"municipality": "rows", "sex": "cols", "agegroup": "wafers"}
    _choose(browser, server["dataset"], ["municipality", "sex", "agegroup"], levels={"municipality": "region"})
    assert browser.execute_script("return chosenPlaces()") == places
    request = browser.execute_script("return tableRequest()")
    _show(browser)
    cells = _cells(_api(server, "/v1/table", request).json(), request)
    tables = _crosstabs(browser)
    agegroups = [t["caption"].split("agegroup: ")[1] for t in tables]
    assert agegroups == ["a0-4", "a10-14", "a15-19", "a5-9", "Total"]  # the answer's codes, the margin last
    for table, code in zip(tables, agegroups):
        _check_crosstab(table, cells, request, places, "n_pert", wafer=[("agegroup", code)])
    _screenshot(browser, "04-wafers")
    # sex moved to the wafers: laid out again from the same answer (no request)
    asked = browser.execute_script("return performance.getEntriesByType('resource').length")
    Select(browser.find_element(By.CSS_SELECTOR, "#dims tr[data-dim='sex'] .dim-place")).select_by_value("wafers")
    places = {"municipality": "rows", "sex": "wafers", "agegroup": "wafers"}
    tables = _crosstabs(browser)
    assert len(tables) == 3 * 5 and all(t["cols"] == [("count",)] for t in tables)  # one column: the value
    for table in tables:
        wafer = re.search(r"sex: (\S+), agegroup: (\S+)", table["caption"]).groups()
        _check_crosstab(table, cells, request, places, "n_pert", wafer=list(zip(["sex", "agegroup"], wafer)))
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == asked


def test_blanked_cells_are_marked_and_explained(browser, server):
    # bob may tabulate single years of age; exactly one person is 19 years old, so some cells are blanked
    bob = server["tokens"]["bob"]
    _signed_in(browser, server, bob)
    _choose(browser, server["dataset"], ["age", "region"])
    request = browser.execute_script("return tableRequest()")
    _show(browser)
    answer = _api(server, "/v1/table", request, token=bob).json()
    (table,) = _crosstabs(browser)
    _check_crosstab(table, _cells(answer, request), request, {"age": "rows", "region": "cols"}, "n_pert")
    blanks = browser.execute_script("return document.querySelectorAll('#crosstab td.blank').length")
    assert blanks == sum(row[-1] is None for row in answer["rows"]) > 0
    terms = [dt.text for dt in browser.find_elements(By.CSS_SELECTOR, "#legend dt")]
    assert BLANK in terms


def test_list_view_is_the_api_answer_cell_for_cell(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["municipality", "sex"], levels={"municipality": "municipality"},
            filters={"agegroup": ["a5-9"]}, measure="income")
    request = browser.execute_script("return tableRequest()")
    assert request == {"dataset": server["dataset"], "dims": ["municipality", "sex"],
                       "levels": {"municipality": "municipality"}, "filters": {"agegroup": "a5-9"}, "measure": "income"}
    _show(browser)
    _view(browser, "list")
    answer = _api(server, "/v1/table", request).json()
    table = browser.find_element(By.ID, "result")
    header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#result tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))")
    assert header == [_header(c, request) for c in answer["columns"]]
    kinds = [_kind(c, request) for c in answer["columns"]]
    assert cells == [[_shown(v, k) for v, k in zip(row, kinds)] for row in answer["rows"]]
    assert len(cells) > 1 and not browser.find_element(By.ID, "crosstab").is_displayed()


def test_bars_of_a_one_dimension_table(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["agegroup"])
    request = browser.execute_script("return tableRequest()")
    _show(browser)
    _view(browser, "bars")
    cells = _cells(_api(server, "/v1/table", request).json(), request)
    bars = browser.execute_script(
        "return [...document.querySelectorAll('#bars g.bar')].map(g => [g.dataset.code,"
        " g.querySelector('text.value').textContent, g.querySelectorAll('rect').length])")
    assert [code for code, _, _ in bars] == [c for (c,) in cells if c != "Total"]
    for code, text, rects in bars:
        value = cells[(code,)]["n_pert"]
        assert text == _shown(value, "count") and rects == (value is not None)
    total = browser.find_element(By.CSS_SELECTOR, "#bars .bar-total").text
    assert total.endswith(_shown(cells[("Total",)]["n_pert"], "count")) and "margin" in total
    _screenshot(browser, "05-bars")
    # a table of two dimensions (agegroup stays ticked) has no bar view
    _choose(browser, server["dataset"], ["sex"])
    _show(browser)
    assert browser.execute_script("return document.querySelector('#view option[value=bars]').disabled") is True
    assert browser.find_element(By.ID, "view").get_attribute("value") == "crosstab"


@pytest.fixture(scope="module")
def grid_server(tmp_path_factory):
    """A service of one grid dataset: persons on 30 squares of 1 km (a few too small to publish,
    one declared square without anybody) by sex; user gina (token "tok-gina-grid"); tables of
    more than 50 cells are answered as jobs."""
    folder = tmp_path_factory.mktemp("grid")
    codes = [f"1kmN{2689 - k // 6}E{4337 + k % 6}" for k in range(31)]
    with pt.Session(str(folder / "grid.duckdb")) as s:
        s.con.execute(
            "CREATE TABLE people AS SELECT row_number() OVER () AS pid, '1kmN' || CAST(2689 - k // 6 AS VARCHAR) "
            "|| 'E' || CAST(4337 + k % 6 AS VARCHAR) AS cell1km, CASE WHEN j % 2 = 0 THEN 'F' ELSE 'M' END AS sex "
            "FROM range(30) a(k), range(200) b(j) WHERE j < (k * k) % 61 + 1")
        s.add_record_keys("people", id_column="pid", seed="grid-browser-seed")
    (folder / "serve.toml").write_text(
        'database = "grid.duckdb"\naudit_log = "audit.jsonl"\nthreshold = 3\nmin_population = 10\n'
        "job_cells = 50\n"  # the 96-cell table of the map test runs as a job
        "[ptable]\nmaximum_entropy = { D = 5, V = 2.5, js = 2 }\n"
        '[datasets.grid]\ntable = "people"\ndims = ["cell1km", "sex"]\n'
        f'codes = {{ cell1km = [{", ".join(repr(c).replace(chr(39), chr(34)) for c in codes)}], sex = ["F", "M"] }}\n'
        '[users.gina]\ndatasets = ["grid"]\n'
        f'token_sha256 = "{hashlib.sha256(b"tok-gina-grid").hexdigest()}"\n', encoding="utf-8")
    server = Server(folder / "serve.toml")
    try:
        yield {"url": server.url, "token": "tok-gina-grid", "codes": codes}
    finally:
        server.stop()


def _job_answer(server, request):
    """The answer of a table request answered as a job: submitted, then fetched when done (the
    same request posted again once its job is done is answered at once, 200)."""
    posted = _api(server, "/v1/table", request)
    if posted.status_code == 200:
        return posted.json()
    job = posted.json()["job"]
    for _ in range(200):
        r = _api(server, job["result"])
        if r.status_code == 200:
            return r.json()
        assert r.status_code == 202, r.text
        time.sleep(0.1)
    raise AssertionError(f"job {job['id']} did not finish")


def test_grid_dataset_draws_a_map_of_its_squares(browser, grid_server):
    _signed_in(browser, grid_server)
    _console_errors(browser)
    _choose(browser, "grid", ["cell1km", "sex"])
    request = browser.execute_script("return tableRequest()")
    _show(browser)
    _view(browser, "map")
    # the table was answered as a job (202); the page fetched its result when it was done
    polled = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert any("/v1/jobs/" in url for url in polled), polled
    cells = _cells(_job_answer(grid_server, request), request)
    squares = browser.execute_script(
        "return [...document.querySelectorAll('#map svg.grid-map rect.square')].map(r => [r.dataset.code,"
        " +r.getAttribute('x'), +r.getAttribute('y'), r.classList.contains('blank'), r.querySelector('title').textContent])")
    # one square per declared code, at the sexes' margin; north up, east to the right
    assert sorted(code for code, *_ in squares) == sorted(grid_server["codes"])
    for code, x, y, blank, title in squares:
        north, east = map(int, re.fullmatch(r"1kmN(\d+)E(\d+)", code).groups())
        assert (x, y) == (east - 4337, 2689 - north)
        value = cells[(code, "Total")]["n_pert"]
        assert blank == (value is None) and title == f"{code}: {_shown(value, 'count')}"
    assert any(blank for *_, blank, _ in squares) and not all(blank for *_, blank, _ in squares)
    legend = browser.find_element(By.CSS_SELECTOR, "#map .map-legend").text
    assert "up to" in legend and f"{BLANK} blanked" in legend
    assert "per 1 km square of cell1km (sex: Total)" in browser.find_element(By.CSS_SELECTOR, "#map .map-caption").text
    _screenshot(browser, "06-grid-map")
    assert _console_errors(browser) == []  # no script error, nothing the page's CSP refused


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
    text = _error_text(browser)
    assert refusal.json()["error"] in text and "refused" in browser.find_element(By.ID, "error-title").text
    assert browser.find_element(By.ID, "error").get_attribute("role") == "alert"
    assert not browser.find_element(By.ID, "answer").is_displayed()
    _screenshot(browser, "07-refusal")


def test_refusal_with_rule_and_advice_shows_both(browser, server):
    # the API may add "rule" and "advice" to a refusal: shown under its message
    _signed_in(browser, server)
    browser.execute_script(
        "window.fetch = async () => new Response(JSON.stringify({error: 'too many cells', rule: 'max_cells',"
        " advice: 'pick fewer dimensions'}), {status: 400, headers: {'Content-Type': 'application/json'}})")
    _choose(browser, server["dataset"], ["sex"])
    browser.find_element(By.ID, "show").click()
    _error_text(browser)
    assert browser.find_element(By.ID, "error-message").text == "too many cells (400)"
    assert browser.find_element(By.ID, "error-rule").text == "Rule: max_cells"
    assert browser.find_element(By.ID, "error-advice").text == "What you can do: pick fewer dimensions"


def test_forbidden_dimension_shows_the_message(browser, server):
    # bob's page offers 'age'; the request is sent with alice's token (rights narrowed while the page was open)
    _signed_in(browser, server, server["tokens"]["bob"])
    _choose(browser, server["dataset"], [server["forbidden_dim"]])
    browser.execute_script("sessionStorage.setItem('protab.token', arguments[0])", server["token"])
    browser.find_element(By.ID, "show").click()
    refusal = _api(server, "/v1/table", browser.execute_script("return tableRequest()"))
    assert refusal.status_code == 403
    assert refusal.json()["error"] in _error_text(browser)
    assert browser.find_element(By.ID, "error-rule").text == "Rule: rights"  # every refusal names its rule
    assert browser.find_element(By.ID, "error-advice").text == f"What you can do: {refusal.json()['advice']}"
    assert not browser.find_element(By.ID, "answer").is_displayed()


def test_level_heading_number_format_and_filters_in_the_caption(browser, server):
    _signed_in(browser, server)
    _choose(browser, server["dataset"], ["municipality"], levels={"municipality": "region"},
            filters={"sex": ["F"]}, measure="income")
    _show(browser)
    _view(browser, "crosstab", "income_pert")
    (table,) = _crosstabs(browser)
    assert table["head"][0][0][0] == "region" and "municipality" not in str(table["head"])
    assert "filters: sex = F" in table["caption"]
    # sums of income are in the hundreds of thousands: shown whole, with thousands separators
    sums = [line["cells"][0][0] for line in table["body"]]
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})+", s) for s in sums), sums


def test_withheld_areas_are_named_in_the_legend(browser, server):
    # areas the disclosure rules withhold are left out of the answer and named in its header
    _signed_in(browser, server)
    browser.execute_script(
        "window.fetch = async () => new Response(JSON.stringify({columns: ['region', 'n_pert'],"
        " rows: [['Total', 40], ['R1', 30]]}), {status: 200, headers: {'Content-Type': 'application/json',"
        " 'Protab-Withheld': JSON.stringify({region: ['R2', 'R3']})}})")
    _choose(browser, server["dataset"], ["region"])
    _show(browser)
    terms = [dt.text for dt in browser.find_elements(By.CSS_SELECTOR, "#legend dt")]
    notes = [dd.text for dd in browser.find_elements(By.CSS_SELECTOR, "#legend dd")]
    assert "Withheld" in terms and "region R2, R3" in notes[terms.index("Withheld")]


def test_saved_table_is_kept_opened_again_and_deleted(browser, server):
    _signed_in(browser, server)
    places = {"region": "rows", "sex": "cols"}
    _choose(browser, server["dataset"], ["region", "sex"], filters={"agegroup": ["a5-9"]})
    request = browser.execute_script("return tableRequest()")
    browser.find_element(By.ID, "saved-name").send_keys("by-region")
    browser.find_element(By.ID, "save").click()
    _wait(browser, lambda d: "by-region" in [o.get_attribute("value") for o in Select(
        d.find_element(By.ID, "saved-list")).options])
    saved = {t["name"]: t for t in _api(server, "/v1/saved").json()["saved"]}
    assert saved["by-region"]["request"] == request
    # another table on the form; opening the saved one puts its request back and shows it
    _choose(browser, server["dataset"], ["agegroup"])
    Select(browser.find_element(By.ID, "saved-list")).select_by_value("by-region")
    browser.find_element(By.ID, "saved-open").click()
    _wait(browser, lambda d: d.find_element(By.ID, "answer").is_displayed()
          and d.find_element(By.ID, "answer").get_attribute("aria-busy") is None)
    assert browser.execute_script("return tableRequest()") == request
    (table,) = _crosstabs(browser)
    _check_crosstab(table, _cells(_api(server, "/v1/table", request).json(), request), request, places, "n_pert")
    browser.find_element(By.ID, "saved-delete").click()
    _wait(browser, lambda d: not Select(d.find_element(By.ID, "saved-list")).options)
    assert "by-region" not in [t["name"] for t in _api(server, "/v1/saved").json()["saved"]]
