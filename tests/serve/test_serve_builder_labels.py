"""The web table builder shows the office's labels in the language chosen (headless chromium).

A dataset whose classifications carry labels in English and Norwegian (docs/serve.md, "Labels"):
after sign-in the page offers the catalogue's languages in a labelled <select>; with one chosen,
the form names the dimensions (their descriptions as the names' titles) and the crosstab shows each code with its label ("0301 Oslo"),
the margins by their labels; switching the language relabels the answer without a new request;
the choice is kept in localStorage and table requests carry it as ``lang``. The two screenshots
of build/screenshots/ (``labels-en``, ``labels-nb``) are the ones in docs/img/.
"""

import hashlib
from pathlib import Path

import browser_fixtures  # skips this module without chromium
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait
from serve_fixtures import Server

import protab as pt

browser, downloads = browser_fixtures.browser, browser_fixtures.downloads  # the fixtures, module-scoped
WAIT = 20
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
TOKEN = "tok-lena-labels"
KOMMUNER = """county,municipality,county_label_en,county_label_nb,label_en,label_nb
03,0301,Oslo,Oslo,Oslo,Oslo
11,1103,Rogaland,Rogaland,Stavanger,Stavanger
46,4601,Western Norway,Vestland,Bergen,Bergen
50,5001,Trøndelag,Trøndelag,Trondheim,Trondheim
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("builder_labels")
    with pt.Session(str(folder / "people.duckdb")) as s:
        s.con.execute(
            "CREATE TABLE people AS SELECT i AS pid, ['0301', '0301', '0301', '0301', '1103', '1103', '4601', '4601',"
            " '4601', '5001'][i % 10 + 1] AS municipality, CASE WHEN (i // 10) % 7 < 4 THEN 'F' ELSE 'M' END AS sex"
            " FROM range(0, 2000) t(i)")
        s.con.execute("ALTER TABLE people ADD COLUMN county VARCHAR")
        s.con.execute("UPDATE people SET county = substr(municipality, 1, 2)")
        s.add_record_keys("people", id_column="pid", seed="builder-labels-seed")
    (folder / "kommuner.csv").write_text(KOMMUNER, encoding="utf-8")
    (folder / "serve.toml").write_text(f"""database = "people.duckdb"
audit_log = "audit.jsonl"
threshold = 3
[ptable]
maximum_entropy = {{ D = 5, V = 2, js = 2 }}
[datasets.people]
description = "Persons by municipality and sex"
dims = ["county", "municipality", "sex"]
hierarchies = {{ municipality = ["county", "municipality"] }}
codes = {{ sex = ["F", "M"] }}
codes_file = {{ municipality = "kommuner.csv" }}
labels.sex = {{ en = {{ F = "Female", M = "Male", Total = "Both sexes" }}, nb = {{ F = "Kvinne", M = "Mann", Total = "Begge kjønn" }} }}
labels.municipality = {{ en = {{ Total = "All of Norway" }}, nb = {{ Total = "Hele landet" }} }}
names.county = {{ en = "County", nb = "Fylke" }}
names.municipality = {{ en = "Municipality", nb = "Kommune" }}
names.sex = {{ en = "Sex", nb = "Kjønn" }}
descriptions.sex = {{ en = "Sex as registered", nb = "Registrert kjønn" }}
[users.lena]
datasets = ["people"]
token_sha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"
""", encoding="utf-8")
    running = Server(folder / "serve.toml")
    try:
        yield {"url": running.url}
    finally:
        running.stop()


def _wait(driver, condition):
    return WebDriverWait(driver, WAIT).until(condition)


def _sign_in(driver, server):
    driver.get(server["url"] + "/")
    driver.execute_script("sessionStorage.clear(); localStorage.clear()")
    driver.get(server["url"] + "/")
    _wait(driver, EC.visibility_of_element_located((By.ID, "token"))).send_keys(TOKEN)
    driver.find_element(By.ID, "signin-button").click()
    _wait(driver, EC.visibility_of_element_located((By.ID, "builder")))


def _show(driver):
    driver.find_element(By.ID, "show").click()
    _wait(driver, lambda d: d.find_element(By.ID, "answer").get_attribute("aria-busy") is None)
    _wait(driver, EC.visibility_of_element_located((By.ID, "answer")))


def _table(driver):
    """The crosstab's stub heading, column headings and row headings, as shown."""
    return driver.execute_script(
        "const t = document.querySelector('#crosstab table.crosstab');"
        "return {stub: t.tHead.querySelector('th.stub').textContent,"
        " cols: [...t.tHead.rows[t.tHead.rows.length - 1].querySelectorAll('th.num')].map(th => th.textContent),"
        " rows: [...t.tBodies[0].rows].map(tr => tr.querySelector('th').textContent)}")


def _screenshot(driver, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(height + 40, 800), 6000))
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


def test_switching_the_language_shows_the_labels_beside_the_codes(browser, server):
    _sign_in(browser, server)
    choice = browser.find_element(By.ID, "lang")
    assert choice.is_displayed() and choice.is_enabled()
    assert [o.get_attribute("value") for o in Select(choice).options] == ["", "en", "nb"]
    assert [o.text for o in Select(choice).options] == ["codes only", "en (English)", "nb (norsk bokmål)"]
    assert browser.execute_script("return document.getElementById('lang').labels.length") == 1
    Select(choice).select_by_value("en")
    rows = {r.get_attribute("data-dim"): r for r in browser.find_elements(By.CSS_SELECTOR, "#dims tbody tr")}
    assert rows["municipality"].find_element(By.CSS_SELECTOR, "label").text == "Municipality"
    for dim in ("municipality", "sex"):
        rows[dim].find_element(By.CSS_SELECTOR, ".dim-pick").click()
    assert browser.execute_script("return tableRequest()")["lang"] == "en"
    _show(browser)
    shown = _table(browser)
    assert shown["stub"] == "Municipality"
    assert shown["cols"] == ["F Female", "M Male", "Both sexes"]
    assert "0301 Oslo" in shown["rows"] and "46 Western Norway" in shown["rows"] and shown["rows"][-1] == "All of Norway"
    _screenshot(browser, "labels-en")

    Select(browser.find_element(By.ID, "lang")).select_by_value("nb")  # relabelled at once, no new request
    shown = _table(browser)
    assert shown["stub"] == "Kommune" and shown["cols"] == ["F Kvinne", "M Mann", "Begge kjønn"]
    assert "46 Vestland" in shown["rows"] and shown["rows"][-1] == "Hele landet"
    assert rows["sex"].find_element(By.CSS_SELECTOR, "label").text == "Kjønn"
    assert rows["sex"].find_element(By.CSS_SELECTOR, "label").get_attribute("title") == "Registrert kjønn"
    _screenshot(browser, "labels-nb")

    # the choice is kept: after a reload (the token in sessionStorage signs in again) it is still nb
    assert browser.execute_script("return localStorage.getItem('protab.lang')") == "nb"
    browser.get(server["url"] + "/")
    _wait(browser, EC.visibility_of_element_located((By.ID, "builder")))
    assert Select(browser.find_element(By.ID, "lang")).first_selected_option.get_attribute("value") == "nb"
    # codes only: the codes alone, as without labels
    Select(browser.find_element(By.ID, "lang")).select_by_value("")
    assert "lang" not in browser.execute_script("return tableRequest()")
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
