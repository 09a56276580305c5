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
from omds_ld.scenarios.grader import CRITERIA
from tests.chat.conftest import TASK
from tests.insurer.test_flows import SKODA
from tests.servers import ExampleServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# where the tests leave screenshots of the page (for docs/), if anywhere
SCREENSHOTS = os.environ.get("OMDS_LD_SCREENSHOTS")


def _screenshot(page: Any, name: str) -> None:
    """The window as a person sees it at the newest answer (1280 × 720, readable at the README's
    width), never the whole page's length."""
    if SCREENSHOTS:
        page.locator("#log article").last.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=False)


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
    """Click the newest answer's next step for this tool, then call it: a step with nothing to
    fill in is called by its click alone; one that opens its form is sent with it."""
    page.wait_for_selector(f"#log article .steps button[data-tool={tool}]")
    before = page.locator("#log article.tool").count()
    page.click(f"#log article:last-of-type .steps button[data-tool={tool}] >> nth=0")
    if page.is_visible("#call"):
        page.click("#call button[type=submit]")
    page.locator("#log article.tool").nth(before).wait_for()  # its answer is in


def _json_body(page: Any, body: Any) -> None:
    """The whole body as JSON: under the form's "advanced" fold where the body has a form."""
    fold = page.locator("#fields details.advanced")
    if fold.count() and not fold.get_attribute("open"):
        page.click("#fields details.advanced summary")
    page.fill("#field-body", json.dumps(body))


def _open_the_risk_object(page: Any) -> None:
    """By hand at Pfefferminzia: the product list, the case (its step's ready body), then the
    form of the next step createRiskObject."""
    page.click("section[data-server=pfefferminzia] button[data-tool=listProducts]")
    page.click("#call button[type=submit]")
    _follow(page, "createCalculation")  # the step's ready body is filled in
    page.wait_for_selector("#log article .steps button[data-tool=createRiskObject]")
    page.click("#log article:last-of-type .steps button[data-tool=createRiskObject] >> nth=0")


def test_by_hand_the_seeds_example_reaches_its_premium(server: ExampleServer, browser: Any) -> None:
    page = browser.new_page(locale="de-DE")
    refused: list[str] = []  # what the page's Content-Security-Policy would have blocked
    page.on("console", lambda m: refused.append(m.text) if "Content Security" in m.text else None)
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    assert page.inner_text("h1") == "Die MCP-Server der Versicherer"
    assert not page.is_visible("#chat"), "no model: no message box"
    _open_the_risk_object(page)
    assert page.inner_text('label[for="shape-p:powerKw"]') == "Leistung (kW) * (1–600)"  # de-DE
    _json_body(page, SKODA)
    page.click("#call button[type=submit]")
    _follow(page, "calculatePremium")
    page.wait_for_selector("#log article .premium")
    assert "1.684,88" in page.inner_text("#log article:last-of-type .premium")
    assert "Bonus-Malus-Stufe = 9" in page.inner_text("#log article:last-of-type .defaults")
    # the answer in the person's words (#49): the page's German around the insurer's labels;
    # the model's English text is folded away
    shown = page.inner_text("#log article:last-of-type")
    assert "Geschäftsfall" in shown and "· berechnet" in shown, shown
    assert "✓ Kfz-Haftpflicht (eingeschlossen)" in shown and "Vollständig und gültig" in shown
    assert "Leistung (kW) 110" in shown  # the risk object's fields by the shape's names
    assert not page.is_visible("#log article:last-of-type pre.text")
    for english in ("Business case", "Validation", "conforms", "Next steps", "Draft of"):
        assert english not in shown, english
    assert refused == [], "the page works within its own Content-Security-Policy"
    _screenshot(page, "chat-by-hand.png")
    page.close()


def test_by_hand_the_risk_object_is_a_form_of_its_shapes_fields(
    server: ExampleServer, browser: Any
) -> None:
    """#21 §4.10: the body a step expects is offered as its shape's fields; JSON stays possible."""
    page = browser.new_page(locale="en-GB")
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    _open_the_risk_object(page)
    # the form says what it is in words, not in schema terms; the JSON and the retry key are
    # there, folded away as advanced
    assert page.inner_text("#fields fieldset.shape legend") == "Vehicle"
    # the fields in the browser's language (en-GB here; Pfefferminzia's own is German), with
    # their bounds, not their datatype or pattern
    assert page.inner_text('label[for="shape-p:powerKw"]') == "power (kW) * (1–600)"
    assert page.inner_text('label[for="shape-p:yearOfConstruction"]').startswith(
        "year of construction *"
    )
    assert not page.is_visible("#field-body") and not page.is_visible("#field-idempotencyKey")
    page.click("#fields details.advanced summary")
    assert page.is_visible("#field-body"), "JSON is the alternative"
    for name, value in SKODA.items():
        if name != "@type":
            page.fill(f'[id="shape-{name}"]', str(value))
    assert page.locator('[id="shape-p:driveType"] option').count() == 4  # "—" and three values
    page.click("#call button[type=submit]")
    _follow(page, "calculatePremium")
    page.wait_for_selector("#log article .premium")
    assert "1,684.88" in page.inner_text("#log article:last-of-type .premium")
    shown = page.inner_text("#log article:last-of-type")  # one language, the browser's
    assert "Business case" in shown and "Complete and valid" in shown, shown
    assert "Kfz-Haftpflicht (included)" in shown  # the insurer's label, the page's word
    assert "power (kW) 110" in shown  # the shape's name for the field, in English
    for german in ("Geschäftsfall", "eingeschlossen", "Folgeschritte"):
        assert german not in shown, german
    page.close()


def test_chat_with_a_model_shows_its_calls_and_answer_and_grades_it(
    chatting: ExampleServer, browser: Any
) -> None:
    # the test's own waiting evaluates strings, which the page's CSP forbids: it is bypassed here
    # (the page by hand runs under it, above)
    page = browser.new_page(
        locale="de-DE", viewport={"width": 1100, "height": 900}, bypass_csp=True
    )
    page.goto(chatting.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    assert page.is_visible("#chat") and "openai:gpt-4.1-mini" in page.inner_text("#mode")
    page.fill("#message", TASK)
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the send button, from the keyboard
    page.wait_for_selector("article.final")
    page.wait_for_selector("body[data-busy=false]")
    assert page.locator("#log article.tool h3").all_inner_texts() == [
        f"pfefferminzia · {tool}"
        for tool in ("listProducts", "createCalculation", "createRiskObject", "calculatePremium")
    ]
    # the model's calls are collapsed; the premium stands out in the final answer
    assert page.locator("#log article.tool details[open]").count() == 0
    assert "1.684,88" in page.inner_text("article.final .premium")
    assert "1684.88 EUR" in page.inner_text("article.final .said")
    assert "5 Modellaufrufe" in page.inner_text("#usage")
    # each call of the model with its tokens and cost (the scripted model's usage, priced)
    per_call = page.locator("#log article.model .usage").all_inner_texts()
    assert len(per_call) == 5 and "1.000 Token ein, 50 aus" in per_call[0]
    page.click("#keep summary")
    page.fill("#expected", "1684.88")
    page.click("#grade")
    page.wait_for_selector("#verdict[data-passed]")
    assert page.get_attribute("#verdict", "data-passed") == "true"
    assert page.locator("#verdict li.passed").count() == len(CRITERIA)
    _screenshot(page, "chat-with-a-model.png")
    # the conversation is in the address: a reload takes it up again
    page.reload()
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#log article.tool").count() == 4
    assert "1684.88 EUR" in page.inner_text("article.final .said")
    # deleted, it is gone from the store: the page starts a new one
    kept = page.evaluate("document.body.dataset.conversation")
    page.click("#keep summary")
    page.click("#delete")
    page.wait_for_function(
        f"document.body.dataset.conversation && document.body.dataset.conversation !== '{kept}'"
    )
    assert page.locator("#log article").count() == 0
    gone = page.evaluate(f"fetch('/chat/api/conversations/{kept}').then(r => r.status)")
    assert gone == 404
    page.close()


def test_a_second_browser_session_cannot_open_the_first_ones_conversation(
    chatting: ExampleServer, browser: Any
) -> None:
    first = browser.new_context()
    page = first.new_page()
    page.goto(chatting.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    page.click("section[data-server=disrupto] button[data-tool=listProducts]")
    page.click("#call button[type=submit]")
    page.wait_for_selector("#log article.tool")
    address = page.url
    assert "#c=" in address
    second = browser.new_context()
    other = second.new_page()
    other.goto(address)
    other.wait_for_selector("body[data-ready=true]")
    assert other.locator("#log article").count() == 0, "a fresh conversation, not the first one's"
    assert other.evaluate("document.body.dataset.conversation") not in address
    first.close()
    second.close()


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
        page.wait_for_selector("#log article .readable")
        # as text in the person's reading of the answer, and in the model's (folded)
        assert markup in page.inner_text("#log article .readable")
        assert markup in str(page.text_content("#log article pre.text"))
        assert page.evaluate("window.__injected") is None
        assert page.locator("#log img").count() == 0
        page.close()
    finally:
        insurer.stop()


def test_with_authorization_required_a_broker_logs_in_and_the_page_works_as_them(
    tmp_path: Path, browser: Any
) -> None:
    secured = ExampleServer(
        tmp_path / "s.sqlite3",
        extra_args=["--require-token", "--access-log", str(tmp_path / "access.jsonl")],
    )
    secured.start()
    try:
        page = browser.new_context(locale="en-GB").new_page()
        page.goto(secured.url + "/chat")
        page.wait_for_selector("body[data-ready=login]")
        assert page.is_visible("#login a")
        page.click("#login a")  # to the authorization server's login page
        page.wait_for_selector("select#broker")
        assert "asks to act for you" in page.inner_text("body")
        page.select_option("select#broker", "beta")
        page.fill("#password", "demo")
        page.click("button[type=submit]")
        page.wait_for_selector("body[data-ready=true]")  # back on the chat page, logged in
        assert "beta" in page.inner_text("#who")
        page.click("section[data-server=pfefferminzia] button[data-tool=listProducts]")
        page.click("#call button[type=submit]")
        page.wait_for_selector("#log article.tool")
        assert not page.locator("#log article.error").count()
        asked = [e for e in secured.access_entries() if e["path"].endswith("/api/products")]
        assert asked and asked[-1]["broker"] == "makler-beta"
        assert asked[-1]["token"]["subject"] == "beta"
        # another browser session is not logged in: it is asked to log in, and calls nothing
        other = browser.new_context().new_page()
        other.goto(secured.url + "/chat")
        other.wait_for_selector("body[data-ready=login]")
        page.click("#logout")
        page.wait_for_selector("body[data-ready=login]")
    finally:
        secured.stop()


def _application_form(page: Any, server: ExampleServer) -> str:
    """By hand from the product list to the offer's createApplication form, opened; the
    offer's text."""
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    page.click("section[data-server=pfefferminzia] button[data-tool=listProducts]")
    page.click("#call button[type=submit]")
    _follow(page, "createCalculation")
    page.wait_for_selector("#log article .steps button[data-tool=createRiskObject]")
    page.click("#log article:last-of-type .steps button[data-tool=createRiskObject] >> nth=0")
    _json_body(page, SKODA)
    page.click("#call button[type=submit]")
    _follow(page, "calculatePremium")
    _follow(page, "createOffer")
    page.wait_for_selector("#log article .steps button[data-tool=createApplication]")
    offer_text = str(page.text_content("#log article:last-of-type pre.text"))  # folded
    page.click("#log article:last-of-type .steps button[data-tool=createApplication] >> nth=0")
    return offer_text


def _payment(page: Any) -> None:
    from tests.mcp.applications import PAYMENT

    for name in ("bc:paymentFrequency", "bc:paymentMethod"):
        page.select_option(f'[id="shape-bc:payment/{name}"]', json.dumps(PAYMENT[name]))
    for name in ("bc:iban", "bc:accountHolder"):
        page.fill(f'[id="shape-bc:payment/{name}"]', PAYMENT[name])


def _state_the_consent(confirmation: Any) -> None:
    """The person states the customer's consent on the confirmation page: who, how, and when
    (now, in the insurer's time zone, as the page's picker takes it)."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    confirmation.fill("input[name=consentedBy]", "Anna Berger")
    confirmation.select_option("select[name=consentMethod]", "in-person")
    now = dt.datetime.now(ZoneInfo("Europe/Vienna")) - dt.timedelta(minutes=1)
    confirmation.fill("input[name=consentedAtLocal]", now.strftime("%Y-%m-%dT%H:%M"))


def _log_in_on_the_confirmation_page(page: Any) -> Any:
    """The person opens the binding call's confirmation page and logs in as the demo broker."""
    with page.context.expect_page() as opened:
        page.click("#log article.confirmation a.page")
    confirmation = opened.value
    confirmation.wait_for_selector("select[name=broker]")
    # the broker the call was made for is preselected: the person types the password only
    assert confirmation.input_value("select[name=broker]") == "demo-broker"
    confirmation.fill("input[name=password]", "demo")
    confirmation.click("form:has(input[name=password]) button[type=submit]")
    confirmation.wait_for_selector("pre")
    return confirmation


@pytest.mark.parametrize("chosen", ["company", "person"])
def test_by_hand_the_policyholder_is_a_person_or_a_company_as_chosen(
    server: ExampleServer, browser: Any, chosen: str
) -> None:
    """The policyholder may be a node of either shape: the form offers the choice, shows one
    form at a time and sends only the one shown at the end, though both were filled in. The
    offer shows the person's shape and only names the company's: chosen, it is read by hand
    (readShape, in the log like any call)."""
    from tests.mcp.applications import PERSON

    page = browser.new_page(locale="en-GB")
    _application_form(page, server)
    choice = '[id="choice-bc:policyholder"]'
    assert page.locator(f"{choice} option").all_inner_texts() == [
        "Person", "Organization"
    ]  # fmt: skip
    person = '[id="shape-bc:policyholder/p:givenName"]'
    company = '[id="shape-bc:policyholder@OrganizationShape/p:legalName"]'
    assert page.is_visible(person) and not page.locator(company).count()
    for name, value in PERSON.items():
        if name != "@type":
            page.fill(f'[id="shape-bc:policyholder/{name}"]', value)
    page.select_option(choice, "1")
    page.wait_for_selector(company)
    assert page.is_visible(company) and not page.is_visible(person)
    assert page.locator("#log article.tool h3", has_text="readShape").count() == 1
    given = {
        "p:legalName": "Berger Transporte GmbH", "p:registrationNumber": "FN 123456a",
        "p:streetAddress": "Hauptstraße 1", "p:postalCode": "1010", "p:addressLocality": "Wien",
        "p:email": "office@berger.example.at",
    }  # fmt: skip
    for name, value in given.items():
        page.fill(f'[id="shape-bc:policyholder@OrganizationShape/{name}"]', value)
    if chosen == "person":  # back to the person: the company's form, filled in, stays unsent
        page.select_option(choice, "0")
        assert page.is_visible(person) and not page.is_visible(company)
    _payment(page)
    page.click("#call button[type=submit]")
    page.wait_for_selector("#log article.confirmation")
    confirmation = _log_in_on_the_confirmation_page(page)
    shown = confirmation.inner_text("pre")
    company_shown = "Berger Transporte GmbH" in shown and "FN 123456a" in shown
    assert "FN FN" not in shown  # the register said once, in each language
    person_shown = PERSON["p:birthDate"] in shown or "12.04.1985" in shown
    assert (company_shown, person_shown) == (chosen == "company", chosen == "person"), shown
    confirmation.close()
    page.close()


def test_by_hand_a_binding_call_is_confirmed_by_the_logged_in_person_on_its_page(
    server: ExampleServer, browser: Any
) -> None:
    import re

    from tests.mcp.applications import PAYMENT, PERSON

    page = browser.new_page(locale="en-GB")
    offer_text = _application_form(page, server)
    digest = re.search(r"sha256:[0-9a-f]{64}", offer_text)
    assert digest, offer_text
    # the application as forms of its shapes, nothing typed as JSON: the policyholder and the
    # payment each a form of its own, the start filled in; the consent is no form here: the
    # person states it on the confirmation page
    assert not page.locator('[id^="shape-bc:consent/"]').count()
    assert page.is_visible("#fields p.stated")
    # the start is the insurer's today (Europe/Vienna), which is not this machine's at every hour
    today = re.search(r"Today at the insurer: (\d{4}-\d{2}-\d{2})", offer_text)
    assert today, offer_text
    assert page.input_value('[id="shape-bc:startDate"]') == today.group(1)
    # the offer's priced start, where it differs, is said beside the application's own
    priced = re.search(r"Priced from the contract start (\d{4}-\d{2}-\d{2})", offer_text)
    if priced and priced.group(1) != today.group(1):
        assert priced.group(1) in page.inner_text("#fields p.priced")
    for name, value in PERSON.items():
        if name != "@type":
            page.fill(f'[id="shape-bc:policyholder/{name}"]', value)
    _payment(page)
    assert page.input_value("#field-body") == "", "no JSON typed"
    page.click("#call button[type=submit]")
    page.wait_for_selector("#log article.confirmation")
    # waiting for the person is no error: drawn as such, not as a refusal
    waiting = page.locator("#log article.tool").last
    assert waiting.get_attribute("class") == "tool waiting", waiting.get_attribute("class")
    assert "waits for your confirmation" in waiting.inner_text()
    # the model's words (its text) stay folded: the person reads the box that is theirs
    assert not waiting.locator("pre.text").is_visible()
    assert "corrected arguments" not in waiting.inner_text()
    # the person opens the confirmation page, logs in as the (demo) broker and reads it there
    confirmation = _log_in_on_the_confirmation_page(page)
    shown = confirmation.inner_text("pre")
    assert "1684.88 EUR" in shown and "Anna Berger" in shown and PAYMENT["bc:iban"] in shown
    assert "the assistant was told nothing of it" in shown
    # the page names the insurer as the person knows it, not its id
    assert "asks to apply at Pfefferminzia Versicherung AG" in confirmation.inner_text("body")
    _state_the_consent(confirmation)
    confirmation.click("button[value=confirm]")
    confirmation.wait_for_selector("text=Confirmed by")
    assert "Go back to the chat" in confirmation.inner_text("body")
    confirmation.close()
    page.click("#log article.confirmation button[data-answer=answered]")
    page.wait_for_selector("#log article.person")
    page.wait_for_selector("#log article.tool .application")
    headline = page.inner_text("#log article.tool .application")
    assert re.fullmatch(r"Application \w+: accepted · policy number PFM-\w+", headline), headline
    assert not page.locator("#log article.tool:has(.application) .premium").count(), "no premium"
    assert page.is_disabled("#log article.confirmation button[data-answer=answered]")
    _screenshot(page, "chat-confirmation.png")
    page.close()


def _by_forms_to_an_application(page: Any, first: bool) -> None:
    """One quote and its application in the conversation open on ``page``, every body through
    the forms of its shapes: the vehicle, the policyholder, the payment; then the person
    confirms on the page (the second time the login is remembered: only the consent)."""
    from tests.mcp.applications import PERSON

    page.click("section[data-server=pfefferminzia] button[data-tool=listProducts]")
    page.click("#call button[type=submit]")
    _follow(page, "createCalculation")
    page.wait_for_selector("#log article .steps button[data-tool=createRiskObject]")
    page.click("#log article:last-of-type .steps button[data-tool=createRiskObject] >> nth=0")
    assert page.inner_text("#fields fieldset.shape legend") == "Vehicle"
    # the fields in the browser's language (en-GB here; Pfefferminzia's own is German), with
    # their bounds, not their datatype or pattern
    assert page.inner_text('label[for="shape-p:powerKw"]') == "power (kW) * (1–600)"
    assert page.inner_text('label[for="shape-p:yearOfConstruction"]').startswith(
        "year of construction *"
    ), "a form, not JSON"
    for name, value in SKODA.items():
        if name != "@type":
            page.fill(f'[id="shape-{name}"]', str(value))
    page.click("#call button[type=submit]")
    _follow(page, "calculatePremium")
    _follow(page, "createOffer")
    page.wait_for_selector("#log article .steps button[data-tool=createApplication]")
    page.click("#log article:last-of-type .steps button[data-tool=createApplication] >> nth=0")
    assert page.is_visible('[id="shape-bc:policyholder/p:givenName"]'), "the policyholder's form"
    for name, value in PERSON.items():
        if name != "@type":
            page.fill(f'[id="shape-bc:policyholder/{name}"]', value)
    _payment(page)
    waiting = page.locator("#log article.confirmation").count()
    page.click("#call button[type=submit]")
    page.locator("#log article.confirmation").nth(waiting).wait_for()
    with page.context.expect_page() as opened:
        page.locator("#log article.confirmation a.page").last.click()
    confirmation = opened.value
    if first:
        confirmation.wait_for_selector("select[name=broker]")
        confirmation.fill("input[name=password]", "demo")
        confirmation.click("form:has(input[name=password]) button[type=submit]")
    confirmation.wait_for_selector("pre")
    _state_the_consent(confirmation)
    confirmation.click("button[value=confirm]")
    confirmation.wait_for_selector("text=Confirmed by")
    confirmation.close()
    page.locator("#log article.confirmation button[data-answer=answered]").last.click()


def test_two_quotes_and_two_applications_in_one_conversation_each_through_forms(
    server: ExampleServer, browser: Any
) -> None:
    """The session is shown a shape's fields once: the second quote's vehicle and the second
    application's policyholder and payment are forms all the same (the page keeps the shapes
    the conversation was shown)."""
    page = browser.new_page(locale="en-GB")
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    for first in (True, False):
        before = page.locator("#log article.tool .application").count()
        _by_forms_to_an_application(page, first)
        page.locator("#log article.tool .application").nth(before).wait_for()
    headlines = page.locator("#log article.tool .application").all_inner_texts()
    assert len(headlines) == 2 and all("accepted" in h for h in headlines), headlines
    page.close()


@pytest.mark.parametrize(
    ("locale", "words", "not_words"),
    [
        ("de-DE", ("Versicherungsnehmer:", "Bestätigen (bindet den Kunden)", "Zugestimmt hat"),
         ("Policyholder:", "Confirm (binds the customer)")),
        ("en-GB", ("Policyholder:", "Confirm (binds the customer)", "Who consented"),
         ("Versicherungsnehmer:", "Bestätigen")),
    ],
)  # fmt: skip
def test_the_confirmation_page_speaks_the_browsers_language_alone(
    server: ExampleServer,
    browser: Any,
    locale: str,
    words: tuple[str, ...],
    not_words: tuple[str, ...],
) -> None:
    """One language per page, the browser's: the text to confirm and the page's own words; the
    insurer's other language folded away (Pfefferminzia writes German and English)."""
    from tests.mcp.applications import PERSON

    page = browser.new_page(locale=locale)
    _application_form(page, server)
    for name, value in PERSON.items():
        if name != "@type":
            page.fill(f'[id="shape-bc:policyholder/{name}"]', value)
    _payment(page)
    page.click("#call button[type=submit]")
    page.wait_for_selector("#log article.confirmation")
    confirmation = _log_in_on_the_confirmation_page(page)
    shown = confirmation.inner_text("pre")
    body = confirmation.inner_text("body")
    assert " / " not in shown, shown  # no line in two languages
    for word in words:
        assert word in shown or word in body, word
    visible = confirmation.locator("pre").first.inner_text() + confirmation.inner_text("form")
    for word in not_words:
        assert word not in visible, word
    confirmation.close()
    page.close()


def test_the_start_page_says_where_a_task_begins_at_each_insurer(
    server: ExampleServer, browser: Any
) -> None:
    """Each insurer's section begins with its products (the norm's entry), said in words; the
    other tools are there, folded away, not a wall of names."""
    page = browser.new_page(locale="en-GB")
    page.goto(server.url + "/chat")
    page.wait_for_selector("body[data-ready=true]")
    for insurer in ("pfefferminzia", "disrupto", "angloamerican"):
        section = f"section[data-server={insurer}]"
        start = page.locator(f"{section} button.start")
        assert start.inner_text() == "Start here: the products", insurer
        assert "A task begins with the insurer's products" in page.inner_text(section)
        assert not page.is_visible(f"{section} details.tools button[data-tool=readShape]")
    page.close()
