"""The chat page of the example server, by hand, in a real browser (Playwright driving Debian's
Chromium). These tests skip without Chromium unless OMDS_LD_REQUIRE_BROWSER=1 (CI sets it and
installs Chromium)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from omds_ld.insurer.data import builtin_insurers_folder
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        message = "Chromium is not installed (apt-get install chromium)"
        if os.environ.get("OMDS_LD_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync"],
        )  # fmt: skip
        yield launched
        launched.close()


def _follow(page: Any, tool: str) -> None:
    """Click the newest answer's next step for this tool, then call it."""
    page.wait_for_selector(f"#log article .steps button[data-tool={tool}]")
    page.click(f"#log article:first-child .steps button[data-tool={tool}] >> nth=0")
    page.click("#call button[type=submit]")


def test_by_hand_the_seeds_example_reaches_its_premium(server: ExampleServer, browser: Any) -> None:
    page = browser.new_page(locale="de-DE")
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("h1") == "Die MCP-Server der Versicherer"
    page.click("section[data-server=pfefferminzia] button[data-tool=listProducts]")
    page.click("#call button[type=submit]")
    _follow(page, "createCalculation")  # the step's ready body is filled in
    page.wait_for_selector("#log article .steps button[data-tool=createRiskObject]")
    page.click("#log article:first-child .steps button[data-tool=createRiskObject] >> nth=0")
    page.fill("#field-body", json.dumps(SKODA))
    page.click("#call button[type=submit]")
    _follow(page, "calculatePremium")
    page.wait_for_selector("#log article .premium")
    assert "1.684,88" in page.inner_text("#log article:first-child .premium")
    assert "Bonus-Malus-Stufe = 9" in page.inner_text("#log article:first-child .defaults")
    page.close()


def test_the_page_works_from_the_keyboard_on_a_phone_sized_window(
    server: ExampleServer, browser: Any
) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 800}, locale="en-GB")
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    page.focus("section[data-server=disrupto] button[data-tool=listProducts]")
    page.keyboard.press("Enter")  # the form opens
    page.focus("#call button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#log article .steps button[data-tool=readDefaultInstance]")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 400, "nothing wider than the window"
    page.close()


def test_an_insurers_label_with_markup_stays_text(tmp_path: Path, browser: Any) -> None:
    folder = tmp_path / "insurers"
    shutil.copytree(builtin_insurers_folder(), folder)
    product = folder / "disrupto" / "kraftfahrt-2022.yaml"
    markup = '<img src=x onerror="window.__injected=1">Kraftfahrt'
    product.write_text(product.read_text().replace("de: Kraftfahrt 2022", f"de: '{markup}'"))
    insurer = ExampleServer(tmp_path / "s.sqlite3", extra_args=["--insurers", str(folder)])
    insurer.start()
    try:
        page = browser.new_page()
        page.goto(insurer.url + "/chat")
        page.wait_for_selector("body[data-ready=true]")
        page.click("section[data-server=disrupto] button[data-tool=listProducts]")
        page.click("#call button[type=submit]")
        page.wait_for_selector("#log article pre")
        assert markup in page.inner_text("#log article pre")
        assert page.evaluate("window.__injected") is None
        assert page.locator("#log img").count() == 0
        page.close()
    finally:
        insurer.stop()
