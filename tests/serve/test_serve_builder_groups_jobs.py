"""The web table builder's custom groups and job list in a real browser (Debian's chromium driven
by selenium, as tests/serve/test_serve_browser.py): codes picked into named groups from the
keyboard (every control labelled, a code of one group disabled in the others), the request then
carries the groups and the page shows the API's cells of the groups; groups saved under a name
travel by that name; a refusal of the differencing rule is shown with its rule and advice; the
job list shows each job's state, cells and creation, opens a finished job's answer and downloads
it in each format as the API's bytes. Screenshots in build/screenshots/ (nothing asserts on pixels).
"""

import time
from pathlib import Path

import browser_fixtures  # skips this module without chromium
import httpx
import pytest
import serve_fixtures as F
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

browser, downloads = browser_fixtures.browser, browser_fixtures.downloads  # the fixtures, module-scoped
WAIT = 20
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
BIG = {"dataset": "persons", "dims": ["municipality", "sex"]}  # above job_cells: a job


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The real service with jobs above 40 cells; bob may use every dimension of persons."""
    folder = tmp_path_factory.mktemp("builder_groups")
    db = F.build_database(folder / "micro.duckdb")
    config, tokens = F.write_setup(folder, db, job_cells=40, job_workers=1)
    server = F.Server(config)
    try:
        yield {"url": server.url, "token": tokens["bob"]}
    finally:
        server.stop()


def _api(server, path, body=None, method=None):
    headers = {"Authorization": f"Bearer {server['token']}"}
    return httpx.request(method or ("GET" if body is None else "POST"), server["url"] + path, json=body,
                         headers=headers, timeout=30)


def _wait(driver, condition):
    return WebDriverWait(driver, WAIT).until(condition)


def _signed_in(driver, server):
    driver.get(server["url"] + "/")
    driver.execute_script("sessionStorage.clear()")
    driver.get(server["url"] + "/")
    _wait(driver, EC.visibility_of_element_located((By.ID, "token"))).send_keys(server["token"])
    driver.find_element(By.ID, "signin-button").click()
    _wait(driver, EC.visibility_of_element_located((By.ID, "builder")))
    Select(driver.find_element(By.ID, "dataset")).select_by_value("persons")
    driver.get_log("browser")  # the console from here on


def _screenshot(driver, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height + 40, 800), 6000))
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def _tick(driver, dims):
    rows = {r.get_attribute("data-dim"): r for r in driver.find_elements(By.CSS_SELECTOR, "#dims tbody tr")}
    for dim in dims:
        rows[dim].find_element(By.CSS_SELECTOR, ".dim-pick").send_keys(Keys.SPACE)


def _add_group(driver, name, codes):
    """Name a group, Enter (adds it), then tick its codes with the space bar."""
    field = driver.find_element(By.ID, "group-name")
    field.send_keys(name, Keys.ENTER)
    group = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, f'#groups-editor fieldset[data-group="{name}"]'))
    for code in codes:
        group.find_element(By.CSS_SELECTOR, f'input[data-code="{code}"]').send_keys(Keys.SPACE)
        group = driver.find_element(By.CSS_SELECTOR, f'#groups-editor fieldset[data-group="{name}"]')


def _show(driver):
    driver.find_element(By.ID, "show").send_keys(Keys.ENTER)
    _wait(driver, lambda d: d.find_element(By.ID, "answer").is_displayed()
          and d.find_element(By.ID, "answer").get_attribute("aria-busy") is None)


def _list_rows(driver):
    """The list view's cells as text, one list per row."""
    Select(driver.find_element(By.ID, "view")).select_by_value("list")
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, "#result tbody tr")]


def _as_text(row):
    """An API row as the list view writes it: codes and levels as they are, counts in en-US."""
    *codes, count = row
    return [str(c) for c in codes] + ["x" if count is None else f"{count:,}"]


def test_groups_picked_from_the_keyboard_are_the_request_and_the_answer(browser, server):
    _signed_in(browser, server)
    _tick(browser, ["agegroup", "sex"])
    Select(browser.find_element(By.ID, "groups-dim")).select_by_value("agegroup")
    _add_group(browser, "young", ["a0-4", "a5-9"])
    _add_group(browser, "older", ["a10-14", "a15-19"])
    older = browser.find_element(By.CSS_SELECTOR, '#groups-editor fieldset[data-group="older"]')
    assert not older.find_element(By.CSS_SELECTOR, 'input[data-code="a0-4"]').is_enabled()  # young's code
    for control in browser.find_elements(By.CSS_SELECTOR, "#groups-form input, #groups-form select"):
        labels = browser.find_elements(By.CSS_SELECTOR, f'label[for="{control.get_attribute("id")}"]')
        assert labels and labels[0].text.strip(), control.get_attribute("outerHTML")
    request = browser.execute_script("return tableRequest()")
    groups = {"young": ["a0-4", "a5-9"], "older": ["a10-14", "a15-19"]}
    assert request["groups"] == {"agegroup": groups}
    _show(browser)
    _screenshot(browser, "builder_custom_groups")
    headings = {th.text for th in browser.find_elements(By.CSS_SELECTOR, "#crosstab th")}
    assert {"young", "older", "Total", "F", "M"} <= headings  # the crosstab of the groups
    answer = _api(server, "/v1/table", request).json()
    assert {r[answer["columns"].index("agegroup")] for r in answer["rows"]} == {"young", "older", "Total"}
    want = [_as_text(r) for r in answer["rows"]]  # sex, agegroup, their levels, n_pert
    assert sorted(_list_rows(browser)) == sorted(want)
    # saved under a name: listed by the API, and the request carries the name while unchanged
    browser.find_element(By.ID, "groups-save-name").send_keys("bands")
    browser.find_element(By.ID, "groups-save").send_keys(Keys.ENTER)
    _wait(browser, lambda d: "bands" in d.find_element(By.ID, "groups-state").text)
    saved = _api(server, "/v1/groups").json()["groups"]
    assert [(g["dim"], g["name"], g["groups"]) for g in saved] == [("agegroup", "bands", groups)]
    assert browser.execute_script("return tableRequest()")["groups"] == {"agegroup": "bands"}
    # the dataset again (no groups), then the saved groups used from their list
    Select(browser.find_element(By.ID, "dataset")).select_by_value("persons")
    browser.execute_script("renderDims()")
    assert "groups" not in browser.execute_script("return tableRequest()")
    Select(browser.find_element(By.ID, "groups-saved")).select_by_value("agegroup/bands")
    browser.find_element(By.ID, "groups-use").click()
    used = browser.execute_script("return tableRequest()")
    assert used["groups"] == {"agegroup": "bands"} and "agegroup" in used["dims"]
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    _api(server, "/v1/groups/persons/agegroup/bands", method="DELETE")


def test_a_group_refused_by_the_differencing_rule_shows_rule_and_advice(browser, server):
    _signed_in(browser, server)
    _tick(browser, ["age"])
    Select(browser.find_element(By.ID, "groups-dim")).select_by_value("age")
    _add_group(browser, "nineteen", ["19"])  # one person
    browser.find_element(By.ID, "show").send_keys(Keys.ENTER)
    box = _wait(browser, EC.visibility_of_element_located((By.ID, "error")))
    _wait(browser, lambda d: box.text.strip())
    assert "group 'nineteen' holds too few records" in browser.find_element(By.ID, "error-message").text
    assert browser.find_element(By.ID, "error-rule").text == "Rule: groups.min_difference"
    assert browser.find_element(By.ID, "error-advice").text.startswith("What you can do: ")
    _screenshot(browser, "builder_custom_groups_refused")


def _done_job(server):
    r = _api(server, "/v1/table", BIG)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    for _ in range(300):
        if _api(server, job["result"]).status_code == 200:
            return next(j for j in _api(server, "/v1/jobs").json()["jobs"] if j["id"] == job["id"])
        time.sleep(0.1)
    raise AssertionError(f"job {job['id']} did not finish")


def test_job_list_opens_and_downloads_a_finished_job(browser, server, downloads):
    job = _done_job(server)
    _signed_in(browser, server)
    listed = f'#jobs-table tr[data-job="{job["id"]}"]'
    first = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, listed))  # listed when signed in
    browser.find_element(By.ID, "jobs-refresh").click()  # and listed again
    _wait(browser, EC.staleness_of(first))
    row = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, listed))
    created, state, cells, table = (td.text for td in row.find_elements(By.TAG_NAME, "td")[:4])
    assert state == "done" and cells == str(job["cells"])
    assert created.startswith(job["created"][:10]) and table == "persons: municipality \u00d7 sex"
    _screenshot(browser, "builder_job_list")
    row.find_element(By.XPATH, ".//button[text()='Open']").click()
    _wait(browser, lambda d: d.find_element(By.ID, "answer").is_displayed())
    assert browser.execute_script("return tableRequest()")["dims"] == BIG["dims"]
    answer = _api(server, f"/v1/jobs/{job['id']}").json()
    cols = ("municipality", "sex", "municipality_level", "sex_level", "n_pert")
    want = [_as_text([r[answer["columns"].index(c)] for c in cols]) for r in answer["rows"]]
    assert sorted(_list_rows(browser)) == sorted(want)
    for fmt, suffix in (("csv", ".csv"), ("parquet", ".parquet"), ("sdmx-csv", ".sdmx.csv")):
        row = browser.find_element(By.CSS_SELECTOR, f'#jobs-table tr[data-job="{job["id"]}"]')
        Select(row.find_element(By.CSS_SELECTOR, "select.job-format")).select_by_value(fmt)
        row.find_element(By.XPATH, ".//button[text()='Download']").click()
        path = downloads / f"persons_municipality_sex{suffix}"
        _wait(browser, lambda d, p=path: p.exists() and p.stat().st_size > 0)
        assert path.read_bytes() == _api(server, f"/v1/jobs/{job['id']}?format={fmt}").content
