"""Headless Chromium for the tests that look at the HTML report as a user would (and for
docs/img/regenerate.py). Debian's `chromium` and `chromium-driver` (`make test` installs them when
it runs as root); without them, or without selenium, `skip_reason()` says why the tests skip."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
# No network here: without the background-networking flags Chromium waits on refused connections.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def skip_reason() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for path, package in ((CHROMIUM, "chromium"), (DRIVER, "chromium-driver")):
        if not Path(path).exists():
            return f"no {path} (Debian package {package}): apt-get install chromium chromium-driver " \
                "(make test does, as root)"
    return None


class Browser:
    """One headless Chromium with a fresh profile directory, removed on close."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="ave-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS + [f"--user-data-dir={self.profile}", f"--window-size={width},{height}"]:
            options.add_argument(flag)
        self.driver = webdriver.Chrome(service=Service(DRIVER), options=options)

    def open(self, path: Path) -> None:
        self.driver.get(path.resolve().as_uri())

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
