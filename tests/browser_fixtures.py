"""Headless chromium for the web builder's tests (Debian's chromium and chromium-driver, driven by
selenium): importing this module skips the importing test module when they are missing; the
``downloads`` (a folder) and ``browser`` (a WebDriver saving downloads there) fixtures, module-scoped."""

import os

import pytest

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(f"the browser test needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}); "
                "`make test` installs them as root", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads):
    """Headless chromium through /usr/bin/chromedriver (no selenium-manager lookup or download),
    keeping the page's console log (``driver.get_log("browser")``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SE_OFFLINE", "true")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--lang=en-US"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        options.add_experimental_option(
            "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False})
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
