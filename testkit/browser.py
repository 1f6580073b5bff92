"""Headless Chromium through Selenium, from Debian's ``chromium`` and ``chromium-driver`` packages.

``headless_chromium()`` returns a driver, or raises ``BrowserUnavailable`` saying what is missing, so a test can
skip with that reason and a benchmark can print it.
"""
from __future__ import annotations

import os
import shutil

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
DRIVER = ("chromedriver",)


class BrowserUnavailable(RuntimeError):
    """No headless Chromium here (the packages or selenium are missing, or the browser would not start)."""


def _which(names: tuple[str, ...], env: str) -> str | None:
    if os.environ.get(env):  # a path named by the environment, or none at all
        return os.environ[env] if os.path.isfile(os.environ[env]) else None
    for name in names:
        path = shutil.which(name) or (f"/usr/lib/chromium/{name}" if os.path.exists(f"/usr/lib/chromium/{name}") else None)
        if path:
            return path
    return None


def headless_chromium(width: int = 1400, height: int = 1000):
    """A started headless Chromium driver (call ``quit()`` when done)."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserUnavailable("selenium is not installed (pip install selenium; it is in the `test` extra)") from None
    browser, driver = _which(CHROMIUM, "CTXCOMP_CHROMIUM"), _which(DRIVER, "CTXCOMP_CHROMEDRIVER")
    if browser is None or driver is None:
        raise BrowserUnavailable("chromium or chromedriver not found (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver), options=options)
    except WebDriverException as err:
        raise BrowserUnavailable(f"headless chromium did not start: {str(err).splitlines()[0]}") from None
