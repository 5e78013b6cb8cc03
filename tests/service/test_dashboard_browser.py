"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium):
every page loads and shows its verdict and raw line, links lead from the overview to a job and on to its
node, a phone-width screen needs no sideways scroll, and no page asks any other host for anything."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from .conftest import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if (CHROMIUM is None or CHROMEDRIVER is None) and os.environ.get("CI"):
    raise RuntimeError("CI must run the browser tests: .ci/run installs chromium and chromium-driver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("Chromium and chromedriver are not installed (apt-get install chromium chromium-driver; "
                ".ci/run installs them)", allow_module_level=True)

from selenium import webdriver  # noqa: E402 - only where a browser exists
from selenium.webdriver.chrome.service import Service as DriverService  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=DriverService(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def requested_hosts(driver: WebDriver) -> set[str]:
    """Every host the browser sent a request to since the last call (from the DevTools network log)."""
    hosts = set()
    for entry in driver.get_log("performance"):
        message: dict[str, Any] = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if not url.startswith(("data:", "about:")):
                hosts.add(urlparse(url).netloc)
    return hosts


def shot(driver: WebDriver, folder: Path, name: str) -> None:
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)), name
    assert path.stat().st_size > 1000


def test_overview_to_job_to_node(demo_server: Server, browser: WebDriver, tmp_path: Path) -> None:
    browser.get(demo_server.url + "/")
    assert browser.find_element(By.ID, "verdict-chart").is_displayed()
    assert browser.find_element(By.ID, "unattributed-rate").text.endswith("%")
    assert "node-01" in browser.find_element(By.ID, "offenders").text
    shot(browser, tmp_path, "overview")
    browser.find_element(By.CSS_SELECTOR, "#recent a[href='/jobs/orion/318517']").click()
    assert browser.current_url == demo_server.url + "/jobs/orion/318517"
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.is_displayed() and verdict.text.startswith("attributed: gpu_hardware")
    raw = browser.find_element(By.CSS_SELECTOR, "#root-cause pre.raw")
    assert raw.is_displayed() and "Xid" in raw.text and "79" in raw.text
    assert "syslog/node-01.log:" in browser.find_element(By.ID, "root-cause").text
    assert browser.find_element(By.ID, "timeline").is_displayed()
    shot(browser, tmp_path, "job")
    browser.find_element(By.CSS_SELECTOR, "a.culprit").click()
    assert browser.current_url == demo_server.url + "/nodes/orion/node-01"
    assert browser.find_element(By.ID, "node-name").text == "node-01"
    assert "318517" in browser.find_element(By.ID, "node-jobs").text
    shot(browser, tmp_path, "node")
    assert requested_hosts(browser) == {urlparse(demo_server.url).netloc}


@pytest.mark.parametrize(("path", "expected"), [
    ("/jobs/helios/318442", "NETIR_LINK_EVT"),
    ("/jobs/orion/318790", "CUDA out of memory"),
    ("/jobs/orion/319201", ""),
    ("/rules", "xid"),
    ("/nodes/orion/node-02", "jobs taken down"),
])
def test_each_page_loads_and_shows_its_lines(demo_server: Server, browser: WebDriver, tmp_path: Path, path: str,
                                             expected: str) -> None:
    browser.get(demo_server.url + path)
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Internal Server Error" not in body and "Not found" not in body
    assert expected in body
    if path.startswith("/jobs/"):
        assert browser.find_element(By.ID, "verdict").text.split(":")[0] in ("attributed", "ambiguous",
                                                                              "unattributed")
    shot(browser, tmp_path, path.strip("/").replace("/", "_"))
    assert requested_hosts(browser) == {urlparse(demo_server.url).netloc}


def test_phone_width_needs_no_sideways_scroll(demo_server: Server, browser: WebDriver, tmp_path: Path) -> None:
    browser.set_window_size(390, 844)
    try:
        for path in ("/", "/jobs/orion/318517", "/nodes/orion/node-01", "/rules"):
            browser.get(demo_server.url + path)
            width = browser.execute_script("return document.documentElement.scrollWidth")
            viewport = browser.execute_script("return window.innerWidth")
            assert width <= viewport, (path, width, viewport)
            shot(browser, tmp_path, "phone" + path.replace("/", "_"))
    finally:
        browser.set_window_size(1280, 1000)


def test_an_unknown_job_is_a_404_page(demo_server: Server, browser: WebDriver) -> None:
    browser.get(demo_server.url + "/jobs/orion/000")
    assert "no verdict for job 000 on cluster orion" in browser.find_element(By.TAG_NAME, "body").text
