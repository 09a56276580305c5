"""One login at the authorization server serves the next authorizations in the same browser (the
three MCP servers each ask): the person clicks to allow, without the password again."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

from tests.auth.flow import REDIRECT, pkce, register
from tests.servers import ExampleServer


class Forms(HTMLParser):
    """Each form of a page: its action and fields."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append((values.get("action", ""), {}))
        elif tag == "input" and values.get("type") == "hidden" and self.forms:
            self.forms[-1][1][values["name"]] = values.get("value", "")


def authorize_url(server: ExampleServer, client_id: str, insurer: str) -> str:
    _, challenge = pkce()
    return f"{server.url}/oauth/authorize?" + str(httpx.QueryParams({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
        "resource": server.mcp(insurer), "code_challenge": challenge,
        "code_challenge_method": "S256", "state": insurer,
    }))  # fmt: skip


def test_a_second_server_needs_a_click_not_the_password_again(secured: ExampleServer) -> None:
    client = register(secured.url)["client_id"]
    origin = {"Origin": secured.url}
    with httpx.Client(timeout=30) as browser:  # one browser, its cookies kept
        first = browser.get(authorize_url(secured, client, "pfefferminzia"))
        assert "You are logged in as" not in first.text
        forms = Forms()
        forms.feed(first.text)
        [(action, fields)] = forms.forms
        sent = browser.post(urljoin(str(first.url), action), headers=origin,
                            data={**fields, "broker": "alpha", "password": "demo"})  # fmt: skip
        assert sent.status_code == 302
        cookie = sent.headers["set-cookie"]
        assert "omds_ld_login=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        assert "Path=/oauth" in cookie

        second = browser.get(authorize_url(secured, client, "disrupto"))
        assert "You are logged in as <strong>" in second.text and "(alpha)" in second.text
        forms = Forms()
        forms.feed(second.text)
        (action, fields), _password_form = forms.forms
        assert fields["continue"] == "1" and "password" not in fields
        allowed = browser.post(urljoin(str(second.url), action), data=fields, headers=origin)
        assert allowed.status_code == 302
        query = parse_qs(urlsplit(allowed.headers["location"]).query)
        assert query["state"] == ["disrupto"] and query["code"] and query["iss"]

    # another browser (no cookie), or a cookie not made here: the password again
    with httpx.Client(timeout=30, cookies={"omds_ld_login": "alpha|9999999999|forged"}) as other:
        page = other.get(authorize_url(secured, client, "disrupto"))
        assert "You are logged in as" not in page.text
        forms = Forms()
        forms.feed(page.text)
        [(action, fields)] = forms.forms
        refused = other.post(urljoin(str(page.url), action), headers=origin,
                             data={**fields, "continue": "1"})  # fmt: skip
        assert refused.status_code == 401 and "unknown broker or wrong password" in refused.text
