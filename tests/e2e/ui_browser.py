"""What the dashboard's browser tests share: `spotrun ui` started as a user starts it (the real
CLI in a child process, its URL read from its output), and headless Chromium from Debian's
packages driven by selenium through the system chromedriver (nothing downloads a browser).

A missing chromium or chromedriver fails the tests: they never skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.conftest import REPO, Env, _kill_supervisors
from tests.helpers import wait_for

# The docs' pictures are rewritten only when asked (UPDATE_SCREENSHOTS=1): a test run never
# changes the repository it runs from
SCREENSHOTS = (
    REPO / "docs" / "screenshots"
    if os.environ.get("UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / f"spotrun-ui-screenshots-{os.getuid()}"
)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@contextmanager
def module_env(base: Path) -> Iterator[Env]:
    """The conftest `env` for a whole module: its own SPOTRUN_HOME and tmux server."""
    home = base / "home"
    tmux_dir = Path(tempfile.mkdtemp(prefix="sr-tmux-", dir="/tmp"))
    variables = {
        **os.environ,
        "SPOTRUN_HOME": str(home),
        "TMUX_TMPDIR": str(tmux_dir),
        "PYTHONPATH": str(REPO),
        "COLUMNS": "200",
    }
    variables.pop("TMUX", None)
    env = Env(home, tmux_dir, variables)
    old = {k: os.environ.get(k) for k in ("SPOTRUN_HOME", "TMUX_TMPDIR", "TMUX")}
    os.environ["SPOTRUN_HOME"] = str(home)
    os.environ["TMUX_TMPDIR"] = str(tmux_dir)
    os.environ.pop("TMUX", None)
    try:
        yield env
    finally:
        _kill_supervisors(home)
        env.tmux("kill-server")
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(tmux_dir, ignore_errors=True)


class Served:
    """A running `spotrun ui` and the URL (with its token) it printed."""

    def __init__(self, env: Env, *args: str) -> None:
        self.proc = env.popen("ui", "--no-browser", *args, start_new_session=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise AssertionError(f"spotrun ui printed no URL: {self.url!r} {self.stderr()}")
        self.base, _, self.token = self.url.partition("/?token=")

    def page(self, path: str) -> str:
        joiner = "&" if "?" in path else "?"
        return f"{self.base}{path}{joiner}token={self.token}"

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def chromium() -> webdriver.Chrome:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():  # a failure, never a skip: scripts/setup installs them
            raise AssertionError(f"{path} is missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(flag)
    options.add_argument("--disable-dev-shm-usage")
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def wait_seen(browser: webdriver.Chrome, css: str, what: str, timeout: float = 60) -> Any:
    """The elements matching `css` once at least one is on the page."""
    return wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, css), timeout, what)


def screenshot(browser: webdriver.Chrome, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


def seen(browser: webdriver.Chrome, css: str, *attributes: str) -> list[dict[str, str]]:
    """What the page shows now for every element matching `css`: its text and attributes,
    read in one step (the pages redraw as they poll, so held elements go stale)."""
    script = """
    const [css, names] = arguments;
    return [...document.querySelectorAll(css)].map((node) => {
      const found = {text: node.textContent || ""};
      for (const name of names) found[name] = node.getAttribute(name) || "";
      return found;
    });
    """
    return list(browser.execute_script(script, css, list(attributes)))


def click(browser: webdriver.Chrome, css: str) -> None:
    browser.execute_script("document.querySelector(arguments[0]).click()", css)
