"""The HTML report in a real browser: every image loads and the page logs no error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[1] / "reports" / "index.html"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def page():
    if not (CHROMIUM and DRIVER):
        pytest.skip("headless Chromium not installed (Debian packages chromium and chromium-driver; "
                    ".ci/run installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--allow-file-access-from-files"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.get(REPORT.as_uri())
    yield driver
    driver.quit()


def test_report_exists_and_is_current():
    assert REPORT.exists(), "run `perfmodel report` to build reports/index.html"


def test_every_image_loads(page):
    images = page.execute_script(
        "return Array.from(document.images).map(i => [i.getAttribute('src'), i.complete && i.naturalWidth > 0])")
    assert len(images) >= 5
    broken = [src for src, ok in images if not ok]
    assert not broken, f"images that did not load: {broken}"


def test_no_errors_in_the_console(page):
    errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_every_study_page_is_linked(page):
    links = {a.get_attribute("href").rsplit("/", 1)[-1] for a in page.find_elements("tag name", "a")}
    for study in ("occupancy", "coalescing", "banks", "latency", "ceilings", "matmul", "transpose", "stencil",
                  "streams", "latency_hiding"):
        assert f"{study}.md" in links
        assert (REPORT.parent / "h200" / f"{study}.md").exists()
