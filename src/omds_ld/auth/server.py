"""The example insurers' authorization server, built from Authlib's server components: metadata
(RFC 8414), dynamic client registration (RFC 7591), authorization code with PKCE and a small login
page for the demo brokers, client credentials for software houses, refresh tokens (rotated), token
exchange (RFC 8693) for the MCP servers, and the JWKS of a signing key kept in its store.

Every token is a JWT for exactly one resource (RFC 8707 ``resource``): an insurer's MCP endpoint or
an insurer's interface. Authlib is synchronous; each endpoint reads the HTTP request first and then
lets Authlib decide in a worker thread.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import html
import secrets
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

import anyio
from authlib.oauth2 import AuthorizationServer, OAuth2Error
from authlib.oauth2.rfc6749 import (
    ClientMixin,
    JsonPayload,
    JsonRequest,
    OAuth2Payload,
    OAuth2Request,
    grants,
)
from authlib.oauth2.rfc6749.errors import (
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    UnauthorizedClientError,
    UnsupportedTokenTypeError,
)
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint
from authlib.oauth2.rfc7591.errors import InvalidClientMetadataError, InvalidRedirectURIError
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response

from omds_ld.auth.cimd import MARK, DocumentRefused, MetadataDocuments, is_document_url
from omds_ld.auth.redirects import MAX_URI, redirect_matches, redirect_uri_problem
from omds_ld.auth.store import AuthStore, Grant
from omds_ld.auth.tokens import (
    ACCESS_TOKEN_TYPE,
    SCOPES,
    TOKEN_EXCHANGE,
    TokenRefused,
    check,
    issue,
)
from omds_ld.serving import BodyLimit

# what the token being made is for, and who exchanged it: set by the grant making it
_audience: contextvars.ContextVar[str] = contextvars.ContextVar("audience")
_actor: contextvars.ContextVar[str | None] = contextvars.ContextVar("actor", default=None)
_not_after: contextvars.ContextVar[float | None] = contextvars.ContextVar("not_after", default=None)
# the resources a grant (code, refresh token) covers, of which each token names one
_covered: contextvars.ContextVar[str | None] = contextvars.ContextVar("covered", default=None)
# the family of refresh tokens a code starts, which every rotation carries on
_family: contextvars.ContextVar[str] = contextvars.ContextVar("family", default="")

SELF_REGISTERED = "omds_ld_self_registered"  # kept with a client that registered itself


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707: the resource asked for is not one this server issues tokens for."""

    error = "invalid_target"


@dataclass(frozen=True)
class AuthSettings:
    """What the authorization server is for: its issuer URL, the resources it issues tokens for
    (URL → what it is), and the demo brokers who may log in (subject → name)."""

    issuer: str
    resources: Mapping[str, str]
    brokers: Mapping[str, str]
    # the demo brokers' password (a real deployment has its own identity provider): given, or
    # made at start and printed on the terminal; never shown on a page
    password: str = field(default_factory=lambda: secrets.token_urlsafe(9), repr=False)
    access_token_seconds: int = 3600
    refresh_token_seconds: int = 30 * 24 * 3600
    code_seconds: int = 300
    # clients that register themselves (RFC 7591): how many from one address and in all, and how
    # long one that never logged anybody in is kept
    # per address, client_name and window: behind one proxy one client software's registrations
    # never lock out another's, and a burst locks out for the window only
    registrations_per_address: int = 50
    registration_window_seconds: float = 3600.0
    registrations: int = 5000
    # unused ones one address may hold, whatever their names: its share of ``registrations``
    registrations_per_source: int = 500
    unused_registration_seconds: float = 24 * 3600.0
    # clients named by a metadata document (an https client_id) may live on loopback: only where
    # the authorization server itself runs there (the demo, tests), never in front of a network
    documents_on_loopback: bool = False
    # clients' metadata documents the operator gives (admitted without fetching them)
    pinned_documents: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class BrokerUser:
    subject: str

    def get_user_id(self) -> str:
        return self.subject


class Client(ClientMixin):  # type: ignore[misc]
    """A registered client: its metadata as registered (RFC 7591), and two of ours:
    ``omds_ld_broker`` (the broker a client-credentials client acts for) and
    ``omds_ld_exchanges_for`` (the resources whose tokens it may exchange: an MCP server's)."""

    def __init__(self, client_id: str, secret_hash: str | None, metadata: Mapping[str, Any]):
        self.client_id = client_id
        self.secret_hash = secret_hash
        self.metadata = dict(metadata)

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        uris = self.metadata.get("redirect_uris") or []
        return str(uris[0]) if uris else None

    def get_allowed_scope(self, scope: str | None) -> str:
        allowed = set(str(self.metadata.get("scope") or " ".join(SCOPES)).split())
        asked = scope.split() if scope else sorted(allowed)
        return " ".join(s for s in asked if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        """Exactly a registered URI; for a loopback one on any port (RFC 8252 7.3: a native
        app listens on whichever port is free)."""
        return redirect_matches(redirect_uri, self.metadata.get("redirect_uris") or [])

    def check_client_secret(self, client_secret: str) -> bool:
        return bool(AuthStore.secret_matches(self.secret_hash, client_secret))

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        """At the token and revocation endpoints: a public client without a secret, a client
        with a secret by either way the metadata advertises (Basic or in the form)."""
        if endpoint in ("token", "revocation"):
            registered = self.metadata.get("token_endpoint_auth_method", "client_secret_basic")
            if registered in SECRET_METHODS:
                return method in SECRET_METHODS
            return bool(method == registered)
        return True

    def check_response_type(self, response_type: str) -> bool:
        return response_type in (self.metadata.get("response_types") or ["code"])

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in (self.metadata.get("grant_types") or ["authorization_code"])


class _Payload(OAuth2Payload):  # type: ignore[misc]
    def __init__(self, values: Mapping[str, list[str]]) -> None:
        self._values = values

    @property
    def data(self) -> dict[str, str]:
        return {k: v[0] for k, v in self._values.items() if v}

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return defaultdict(list, {k: list(v) for k, v in self._values.items()})


class ReadRequest(OAuth2Request):  # type: ignore[misc]
    """An HTTP request read whole (query and form), for Authlib's synchronous server."""

    def __init__(
        self,
        method: str,
        uri: str,
        headers: Mapping[str, str],
        query: Mapping[str, list[str]],
        form: Mapping[str, list[str]],
    ) -> None:
        super().__init__(method, uri, headers=headers)  # case-insensitive, as Starlette reads them
        merged: dict[str, list[str]] = {k: list(v) for k, v in query.items()}
        for key, values in form.items():
            merged.setdefault(key, []).extend(values)
        self._query = {k: v[0] for k, v in query.items() if v}
        self._form = {k: v[0] for k, v in form.items() if v}
        self.payload = _Payload(merged)

    @property
    def args(self) -> dict[str, str]:
        return self._query

    @property
    def form(self) -> dict[str, str]:
        return self._form


class ReadJsonRequest(JsonRequest):  # type: ignore[misc]
    def __init__(
        self, method: str, uri: str, headers: Mapping[str, str], data: Any, address: str = ""
    ) -> None:
        super().__init__(method, uri, headers)
        self.address = address  # the client's network address, for the bounds on registrations

        class Payload(JsonPayload):  # type: ignore[misc]
            @property
            def data(self) -> Any:
                return data

        self.payload = Payload()


async def read_request(request: Request) -> ReadRequest:
    query: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        query.setdefault(key, []).append(value)
    form: dict[str, list[str]] = {}
    if request.method == "POST":
        async with request.form() as parsed:
            for key, item in parsed.multi_items():
                form.setdefault(key, []).append(str(item))
    return ReadRequest(request.method, str(request.url), request.headers, query, form)


def _resources(request: OAuth2Request, known: Mapping[str, str]) -> list[str]:
    """The resources an authorization request names (RFC 8707), each one of ours; one at least."""
    asked = list(dict.fromkeys(request.payload.datalist.get("resource", [])))
    if not asked:
        raise InvalidTargetError("name the resource (RFC 8707): an MCP endpoint's URL")
    for resource in asked:
        if resource not in known:
            raise InvalidTargetError(f"no tokens are issued for {resource}")
    return asked


def _chosen(request: OAuth2Request, covered: str) -> str:
    """The one resource of those a grant covers that this token is for: the one the token request
    names, or the grant's only one."""
    resources = covered.split()
    asked = request.payload.datalist.get("resource", [])
    if not asked and len(resources) == 1:
        return resources[0]
    if len(asked) != 1 or asked[0] not in resources:
        raise InvalidTargetError(
            "name one resource the grant was given for: " + ", ".join(resources)
        )
    return str(asked[0])


def _resource(request: OAuth2Request, known: Mapping[str, str]) -> str:
    """The one resource a request names (RFC 8707), which must be one of ours."""
    asked = request.payload.datalist.get("resource", [])
    if len(asked) != 1:
        raise InvalidTargetError("name exactly one resource (RFC 8707): an MCP endpoint's URL")
    if asked[0] not in known:
        raise InvalidTargetError(f"no tokens are issued for {asked[0]}")
    return str(asked[0])


class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    """Authorization code, PKCE (S256) always, for one resource the code remembers."""

    TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")

    def validate_authorization_request(self) -> str:
        redirect_uri = str(super().validate_authorization_request())
        data = self.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError(
                "PKCE is required: code_challenge with code_challenge_method S256",
                redirect_uri=redirect_uri,
            )
        try:
            _resources(self.request, self.server.settings.resources)
        except InvalidTargetError as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        data = request.payload.data
        self.server.store.add_code(
            code,
            Grant(
                client_id=request.client.get_client_id(),
                subject=request.user.subject,
                scope=request.scope or "",
                resource=" ".join(_resources(request, self.server.settings.resources)),
                expires=time.time() + self.server.settings.code_seconds,
                redirect_uri=data.get("redirect_uri", ""),
                challenge=data.get("code_challenge", ""),
                challenge_method=data.get("code_challenge_method", ""),
                family=secrets.token_urlsafe(12),
            ),
        )

    def query_authorization_code(self, code: str, client: Client) -> _Code | None:
        kept = self.server.store.code(code, client.get_client_id())
        return None if kept is None else _Code(code, kept)

    def validate_token_request(self) -> None:
        """Authlib's checks (client, code, redirect URI, PKCE); a code that fails any of them
        after it was found is used up: no second guess at its verifier."""
        try:
            super().validate_token_request()
        except OAuth2Error:
            code = self.request.form.get("code")
            if code:
                self.server.store.burn_code(code)
            raise

    def delete_authorization_code(self, authorization_code: _Code) -> None:
        """Nothing left to do: the code was redeemed before any token was made."""

    def authenticate_user(self, authorization_code: _Code) -> BrokerUser:
        return BrokerUser(authorization_code.grant.subject)

    def create_token_response(self) -> Any:
        code: _Code = self.request.authorization_code
        _audience.set(_chosen(self.request, code.grant.resource))
        _covered.set(code.grant.resource)
        # redeemed at once and atomically: of two requests with one code, one gets tokens
        if not self.server.store.redeem_code(code.code):
            raise InvalidGrantError("the code was used already; what it brought is revoked")
        _family.set(code.grant.family)
        return super().create_token_response()


class _Code:
    def __init__(self, code: str, grant: Grant) -> None:
        self.code = code
        self.grant = grant
        self.code_challenge = grant.challenge
        self.code_challenge_method = grant.challenge_method

    def get_redirect_uri(self) -> str:
        return self.grant.redirect_uri

    def get_scope(self) -> str:
        return self.grant.scope


class Pkce(CodeChallenge):  # type: ignore[misc]
    SUPPORTED_CODE_CHALLENGE_METHOD = ("S256",)

    def get_authorization_code_challenge(self, authorization_code: _Code) -> str:
        return authorization_code.code_challenge

    def get_authorization_code_challenge_method(self, authorization_code: _Code) -> str:
        return authorization_code.code_challenge_method


class _Refresh:
    def __init__(self, token: str, grant: Grant) -> None:
        self.token = token
        self.grant = grant

    def check_client(self, client: Client) -> bool:
        return client.get_client_id() == self.grant.client_id

    def get_scope(self) -> str:
        return self.grant.scope

    def get_expires_in(self) -> int:
        return max(0, int(self.grant.expires - time.time()))

    def is_expired(self) -> bool:
        return self.grant.expires <= time.time()

    def is_revoked(self) -> bool:
        return False


class RefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    """A refresh token is redeemed once, atomically, and brings a new one of the same family
    (OAuth 2.1); its second use (a stolen or replayed token) revokes the whole family (RFC 9700
    4.14.2)."""

    TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token: str) -> _Refresh | None:
        kept = self.server.store.refresh_token(refresh_token)
        return None if kept is None else _Refresh(refresh_token, kept)

    def authenticate_user(self, refresh_token: _Refresh) -> BrokerUser:
        return BrokerUser(refresh_token.grant.subject)

    def revoke_old_credential(self, refresh_token: _Refresh) -> None:
        """Nothing left to do: the token was redeemed before its successor was made."""

    def create_token_response(self) -> Any:
        refresh: _Refresh = self.request.refresh_token
        covered = refresh.grant.resource
        _audience.set(_chosen(self.request, covered))
        _covered.set(covered)
        if not self.server.store.redeem_refresh_token(refresh.token):
            raise InvalidGrantError(
                "the refresh token was used already; every token of its grant is revoked"
            )
        _family.set(refresh.grant.family)
        return super().create_token_response()


class ClientCredentials(grants.ClientCredentialsGrant):  # type: ignore[misc]
    """A software house's own client: a token for one resource, as the broker it acts for."""

    TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post")

    def create_token_response(self) -> Any:
        """A token of the scope asked for, within the client's; without one asked, the client's
        whole scope (RFC 6749 3.3), never an empty one by omission."""
        _audience.set(_resource(self.request, self.server.settings.resources))
        scope = self.request.client.get_allowed_scope(self.request.payload.scope)
        token = self.generate_token(scope=scope, include_refresh_token=False)
        self.save_token(token)
        return 200, token, self.TOKEN_RESPONSE_HEADER


class TokenExchange(grants.BaseGrant, grants.TokenEndpointMixin):  # type: ignore[misc]
    """RFC 8693: an MCP server trades the token a broker sent it for a token of that broker at
    the insurer's interface (``resource``), carrying who exchanged it (``act``). Only a client
    registered to exchange tokens of that MCP endpoint may, and never for more scope."""

    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = ("client_secret_basic", "client_secret_post")

    def validate_token_request(self) -> None:
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise UnauthorizedClientError("the client may not exchange tokens")
        form = self.request.form
        token, kind = form.get("subject_token"), form.get("subject_token_type")
        if not token or kind != ACCESS_TOKEN_TYPE:
            raise InvalidRequestError(f"subject_token with subject_token_type {ACCESS_TOKEN_TYPE}")
        target = _resource(self.request, self.server.settings.resources)
        sources = client.metadata.get("omds_ld_exchanges_for") or []
        identity = None
        for source in sources:
            try:
                identity = check(
                    token, self.server.store.public_keys(), self.server.issuer, source,
                    revoked=self.server.store.grant_revoked,
                )  # fmt: skip
                break
            except TokenRefused as refused:
                reason = refused.description
        if identity is None:
            raise InvalidGrantError(
                f"the subject token is not one this client may exchange ({reason})"
                if sources
                else "the client exchanges no tokens"
            )
        asked = set((self.request.payload.scope or "").split()) or set(identity.scopes)
        if not asked <= identity.scopes:
            raise InvalidScopeError("more scope than the subject token has")
        self.request.client = client
        self.request.user = BrokerUser(identity.subject)
        self.request.scope = " ".join(sorted(asked))
        self._target, self._not_after = target, identity.expires
        self._grant = identity.grant

    def create_token_response(self) -> Any:
        _audience.set(self._target)
        _actor.set(self.request.client.get_client_id())
        _not_after.set(self._not_after)
        _family.set(self._grant)  # the insurer's token is of the broker's grant
        token = self.generate_token(
            user=self.request.user, scope=self.request.scope, include_refresh_token=False
        )
        token["issued_token_type"] = ACCESS_TOKEN_TYPE
        return 200, token, self.TOKEN_RESPONSE_HEADER


class _UnsupportedTokenType(UnsupportedTokenTypeError):  # type: ignore[misc]
    """RFC 7009 2.2.1: an error response as RFC 6749 5.2 has it, 400 (Authlib answers 401)."""

    status_code = 400


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    """RFC 7009: a client revokes a refresh token it holds, and with it the whole grant (every
    refresh token of its family). Access tokens are signed JWTs that expire by themselves within
    ``access_token_seconds``; they cannot be revoked here (``unsupported_token_type``)."""

    CLIENT_AUTH_METHODS = ("client_secret_basic", "client_secret_post", "none")
    SUPPORTED_TOKEN_TYPES = ("refresh_token",)

    def check_params(self, request: Any, client: Any) -> None:
        if "token" not in request.form:
            raise InvalidRequestError("name the token to revoke")
        hint = request.form.get("token_type_hint")
        if hint and hint not in self.SUPPORTED_TOKEN_TYPES:
            raise _UnsupportedTokenType(
                "access tokens expire by themselves; revoke the refresh token"
            )

    def query_token(self, token_string: str, token_type_hint: str | None) -> _Refresh | None:
        kept = self.server.store.refresh_token(token_string)
        if kept is None and token_string.count(".") == 2:
            raise _UnsupportedTokenType(
                "access tokens expire by themselves; revoke the refresh token"
            )
        return None if kept is None else _Refresh(token_string, kept)

    def revoke_token(self, token: _Refresh, request: Any) -> None:
        self.server.store.revoke_refresh_token(token.token)


class _Metadata(ClientMetadataClaims):  # type: ignore[misc]
    """RFC 7591's checks, with redirect URIs by our rules (a native app's own scheme too)."""

    def validate_redirect_uris(self) -> None:
        uris = self.get("redirect_uris") or []
        for uri in uris if isinstance(uris, list) else [uris]:
            problem = redirect_uri_problem(uri)
            if problem:
                raise InvalidRedirectURIError(problem)


# the ways a client with a secret may present it, as the metadata advertises them
SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post"})


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """Open dynamic registration (RFC 7591), for MCP clients such as Claude Code: such a client
    may use the authorization code and refresh tokens, nothing else."""

    ALLOWED_GRANTS = frozenset({"authorization_code", "refresh_token"})

    def __init__(self, server: Any) -> None:
        super().__init__(server, claims_classes=[_Metadata])

    def authenticate_token(self, request: Any) -> dict[str, bool]:
        return {"open": True}

    def get_server_metadata(self) -> dict[str, Any]:
        return dict(self.server.metadata())

    def generate_client_secret(self, request: Any) -> str | None:
        method = (request.payload.data or {}).get("token_endpoint_auth_method")
        return None if method == "none" else secrets.token_urlsafe(32)

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        """RFC 7591 3.2.1: a public client is issued no secret, so none is named."""
        info: dict[str, Any] = super().generate_client_info(request)
        if info.get("client_secret") is None:
            info.pop("client_secret", None)
            info.pop("client_secret_expires_at", None)
        return info

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
    ) -> Client:
        granted = set(client_metadata.get("grant_types") or ["authorization_code"])
        if not granted <= self.ALLOWED_GRANTS:
            raise InvalidRequestError(
                "registered clients may use authorization_code and refresh_token only"
            )
        metadata = {k: v for k, v in client_metadata.items() if not str(k).startswith("omds_ld_")}
        metadata.setdefault("token_endpoint_auth_method", "client_secret_basic")
        _check_metadata(metadata)
        settings, store = self.server.settings, self.server.store
        address = getattr(request, "address", "")
        store.forget_unused_clients(settings.unused_registration_seconds)
        name = str(metadata.get("client_name") or "")
        since = time.time() - settings.registration_window_seconds
        mine, held, total = store.self_registered(address, name, since)
        if mine >= settings.registrations_per_address:
            raise InvalidClientMetadataError(
                "too many clients of this name registered themselves from this address in the "
                f"last {settings.registration_window_seconds / 60:g} minutes; try again later"
            )
        if held >= settings.registrations_per_source:
            raise InvalidClientMetadataError(
                "this address holds its share of clients that registered themselves and never "
                "logged anybody in, whatever their names; one that never does is forgotten "
                f"after {settings.unused_registration_seconds / 3600:g} h"
            )
        if total >= settings.registrations:
            raise InvalidClientMetadataError(
                "too many clients registered themselves in all; one that never logs anybody in "
                f"is forgotten after {settings.unused_registration_seconds / 3600:g} h"
            )
        store.add_client(
            client_info["client_id"], client_info.get("client_secret"),
            {**metadata, SELF_REGISTERED: True}, address=address, self_registered=True,
        )  # fmt: skip
        return Client(client_info["client_id"], None, metadata)


THREADS = 8  # an authorization code's or token's worker threads, of the 40 shared ones
LOGIN_COOKIE = "omds_ld_login"
LOGIN_SECONDS = 8 * 3600.0  # a working day: then the password again


class Logins:
    """Who logged in at this authorization server in a browser: a cookie (HttpOnly, SameSite
    Lax, below the issuer's path) signed with a key of this process, so that one login serves
    the three MCP servers' authorizations; each still needs the person's click to allow."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def issue(self, subject: str, now: float | None = None) -> str:
        text = f"{subject}|{int((now or time.time()) + LOGIN_SECONDS)}"
        return f"{text}|{self._mac(text)}"

    def subject(self, cookie: str, now: float | None = None) -> str | None:
        """The broker a cookie names while it is valid; None for any other."""
        subject, _, rest = cookie.partition("|")
        expires, _, mac = rest.partition("|")
        if not (subject and expires.isdigit() and mac):
            return None
        if not hmac.compare_digest(mac, self._mac(f"{subject}|{expires}")):
            return None
        return subject if int(expires) > (now or time.time()) else None


class ExampleAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """The authorization server of the example server; ``routes()`` mounts it."""

    def __init__(self, settings: AuthSettings, store: AuthStore) -> None:
        super().__init__(scopes_supported=list(SCOPES))
        self.settings = settings
        self.issuer = settings.issuer
        self.store = store
        self.documents = MetadataDocuments(loopback=settings.documents_on_loopback)
        self.logins = Logins()
        # the worker threads its Authlib calls may take at once (of the process's shared ones)
        self.limiter = anyio.CapacityLimiter(THREADS)
        for document in settings.pinned_documents:
            self.documents.pin(document)
        self.register_grant(CodeGrant, [Pkce(required=True)])
        self.register_grant(RefreshGrant)
        self.register_grant(ClientCredentials)
        self.register_grant(TokenExchange)
        self.register_endpoint(Registration)
        self.register_endpoint(Revocation)

    # what Authlib asks of a server

    def query_client(self, client_id: str) -> Client | None:
        """A registered client, or one its metadata document names (fetched safely, kept for
        its max-age); a document that cannot be used is refused with the reason."""
        if is_document_url(client_id):
            try:
                return Client(client_id, None, self.documents.document(client_id))
            except DocumentRefused as refused:
                raise InvalidClientError(description=str(refused)) from None
        found = self.store.client(client_id)
        return None if found is None else Client(client_id, *found)

    def known_client(self, client_id: str) -> Client | None:
        """As ``query_client``, never fetching (the login page, on the event loop: its request
        was validated, and its document fetched, just before)."""
        if is_document_url(client_id):
            kept = self.documents.kept(client_id)
            return None if kept is None else Client(client_id, None, kept)
        return self.query_client(client_id)

    def save_token(self, token: Mapping[str, Any], request: OAuth2Request) -> None:
        refresh = token.get("refresh_token")
        if refresh:
            self.store.add_refresh_token(
                refresh,
                Grant(
                    client_id=request.client.get_client_id(),
                    subject=request.user.subject,
                    scope=str(token.get("scope", "")),
                    resource=_covered.get() or _audience.get(),
                    expires=time.time() + self.settings.refresh_token_seconds,
                    family=_family.get() or secrets.token_urlsafe(12),
                ),
            )

    def generate_token(
        self,
        grant_type: str,
        client: Client,
        user: BrokerUser | None = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        now = int(time.time())
        lifetime = self.settings.access_token_seconds
        not_after = _not_after.get()
        expires = min(now + lifetime, int(not_after)) if not_after else now + lifetime
        subject = (
            user.subject
            if user is not None
            else str(client.metadata.get("omds_ld_broker") or client.get_client_id())
        )
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": _audience.get(),
            "client_id": client.get_client_id(),
            "scope": scope or "",
            "iat": now,
            "exp": expires,
            "jti": secrets.token_urlsafe(16),
        }
        if _family.get():  # the grant: its tokens are refused once it is revoked
            claims["sid"] = _family.get()
        actor = _actor.get()
        if actor:
            claims["act"] = {"sub": actor}
        if user is not None and user.subject in self.settings.brokers:
            claims["name"] = self.settings.brokers[user.subject]
        token = {
            "access_token": issue(self.store.signing_key(), claims),
            "token_type": "Bearer",
            "expires_in": expires - now,
            "scope": scope or "",
        }
        if include_refresh_token:
            token["refresh_token"] = secrets.token_urlsafe(32)
        return token

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Authlib's signals (a client authenticated, a token revoked): nobody listens."""

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request

    def create_json_request(self, request: Any) -> JsonRequest:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Response:
        headers = dict(headers or [])
        if isinstance(body, dict):
            headers.pop("Content-Type", None)
            return JSONResponse(body, status, headers={**headers, "Cache-Control": "no-store"})
        return Response(body or b"", status, headers=headers)

    # what it publishes

    def metadata(self) -> AuthorizationServerMetadata:
        issuer = self.issuer
        metadata = AuthorizationServerMetadata(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "registration_endpoint": f"{issuer}/register",
                "revocation_endpoint": f"{issuer}/revoke",
                "revocation_endpoint_auth_methods_supported": [
                    "client_secret_basic", "client_secret_post", "none",
                ],
                "jwks_uri": f"{issuer}/jwks",
                "scopes_supported": list(SCOPES),
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code", "refresh_token", "client_credentials", TOKEN_EXCHANGE,
                ],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic", "client_secret_post", "none",
                ],
                "code_challenge_methods_supported": ["S256"],
                # a client may be named by its metadata document's URL instead of registering
                "client_id_metadata_document_supported": True,
                # every authorization response names this issuer (RFC 9207: against mix-up)
                "authorization_response_iss_parameter_supported": True,
                "service_documentation": "https://w3id.org/omds-ld",
            }
        )  # fmt: skip
        metadata.validate()
        return metadata

    # the HTTP side

    def routes(self, issuer_path: str) -> list[BaseRoute]:
        def capped(endpoint: Any) -> Any:  # a form or a registration is a few hundred bytes
            return BodyLimit(request_response(endpoint), MAX_BODY_BYTES)

        return [
            Route(f"/.well-known/oauth-authorization-server{issuer_path}", self._metadata),
            Route(f"{issuer_path}/jwks", self._jwks),
            Route(f"{issuer_path}/authorize", capped(self._authorize), methods=["GET", "POST"]),
            Route(f"{issuer_path}/token", capped(self._token), methods=["POST"]),
            Route(f"{issuer_path}/register", capped(self._register), methods=["POST"]),
            Route(f"{issuer_path}/revoke", capped(self._revoke), methods=["POST"]),
        ]

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(dict(self.metadata()))

    async def _jwks(self, request: Request) -> Response:
        keys = await anyio.to_thread.run_sync(lambda: self.store.public_keys(fresh=True))
        return JSONResponse(keys.as_dict(private=False), headers={"Cache-Control": "max-age=300"})

    async def _token(self, request: Request) -> Response:
        read = await read_request(request)
        response: Response = await anyio.to_thread.run_sync(
            self._in_context, self.create_token_response, read, limiter=self.limiter
        )
        return response

    async def _revoke(self, request: Request) -> Response:
        read = await read_request(request)
        response: Response = await anyio.to_thread.run_sync(
            self.create_endpoint_response, "revocation", read
        )
        return response

    async def _register(self, request: Request) -> Response:
        try:
            data = await request.json()
        except ValueError:
            return JSONResponse(
                {"error": "invalid_client_metadata", "error_description": "the body is no JSON"},
                400,
            )
        address = request.client.host if request.client else ""
        read = ReadJsonRequest(request.method, str(request.url), request.headers, data, address)
        response: Response = await anyio.to_thread.run_sync(
            self.create_endpoint_response, "client_registration", read
        )
        return response

    @staticmethod
    def _in_context(function: Any, *arguments: Any) -> Any:
        """Run in a context of its own: the audience and actor of one token stay with it."""
        return contextvars.copy_context().run(function, *arguments)

    async def _authorize(self, request: Request) -> Response:
        read = await read_request(request)
        try:
            # on the authorization server's own threads: a client's slow metadata document never
            # holds the process's shared ones (the chat page reads its store on them)
            grant = await anyio.to_thread.run_sync(
                self.get_consent_grant, read, limiter=self.limiter
            )
        except OAuth2Error as error:
            return self._login_page(read, error=error.description or error.error, status=400)
        logged_in = self.logins.subject(request.cookies.get(LOGIN_COOKIE, ""))
        if logged_in not in self.settings.brokers:
            logged_in = None
        if request.method == "GET":
            return self._login_page(read, logged_in=logged_in)
        if request.headers.get("origin") not in (None, _origin(str(request.url))):
            return self._login_page(
                read, error="this form is sent from its own page only", status=403
            )
        if read.form.get("continue") == "1" and logged_in is not None:
            subject = logged_in  # the person logged in at this server before: they allow
        else:
            subject = read.form.get("broker", "")
            if subject not in self.settings.brokers or not secrets.compare_digest(
                read.form.get("password", ""), self.settings.password
            ):
                return self._login_page(read, error="unknown broker or wrong password", status=401)
        response: Response = await anyio.to_thread.run_sync(
            self._in_context, self.create_authorization_response, read, BrokerUser(subject), grant
        )
        if 300 <= response.status_code < 400:  # one login serves the next client's request
            response.set_cookie(
                LOGIN_COOKIE, self.logins.issue(subject), max_age=int(LOGIN_SECONDS),
                path=urlsplit(self.issuer).path or "/", httponly=True, samesite="lax",
                secure=self.issuer.startswith("https://"),
            )  # fmt: skip
        return self._with_issuer(response)

    def _with_issuer(self, response: Response) -> Response:
        """An authorization response (the code, or an error, sent back to the client) names
        this issuer (RFC 9207), so a client talking to several cannot be mixed up."""
        location = response.headers.get("location")
        if location and 300 <= response.status_code < 400:
            parts = urlsplit(location)
            query = "&".join(p for p in (parts.query, urlencode({"iss": self.issuer})) if p)
            response.headers["location"] = parts._replace(query=query).geturl()
        return response

    def _login_page(
        self,
        read: ReadRequest,
        error: str = "",
        status: int = 200,
        logged_in: str | None = None,
    ) -> Response:
        """The demo brokers' login: who, a password, what the client asks for, whether it named
        itself, and where the code goes: the person decides by all of it."""
        asked = {k: v for k, v in read.payload.data.items() if k not in ("broker", "password")}
        client = self.known_client(asked.get("client_id", "")) if asked.get("client_id") else None
        name = (client.metadata.get("client_name") if client else None) or asked.get(
            "client_id", ""
        )
        claimed = (
            " (a client that registered itself: its name is its own claim)"
            if client is not None and client.metadata.get(SELF_REGISTERED)
            else f" (as the document at {client.metadata[MARK]} says of itself)"
            if client is not None and client.metadata.get(MARK)
            else ""
        )
        resource = ", ".join(
            self.settings.resources.get(r, r) for r in read.payload.datalist.get("resource", [])
        )
        target = str(
            asked.get("redirect_uri") or (client.get_default_redirect_uri() if client else "")
        )
        where = _destination(target)
        intro = (
            f"<p><strong>{html.escape(str(name))}</strong>{html.escape(claimed)} asks to act "
            f"for you at <strong>{html.escape(resource)}</strong> with "
            f"<code>{html.escape(asked.get('scope', ' '.join(SCOPES)))}</code>.</p>"
            + (
                f"<p>After you log in, you are sent back with the code to "
                f"<strong>{html.escape(where)}</strong>.</p>"
                if where
                else ""
            )
        )
        problem = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
        form = self._login_form(read, logged_in) if status != 400 else ""
        # the form's answer redirects to the code's destination: a native app's own scheme too
        scheme = urlsplit(target).scheme
        native = f" {scheme}:" if "." in scheme and redirect_uri_problem(target) is None else ""
        return HTMLResponse(
            LOGIN_PAGE.format(body=intro + problem + form),
            status,
            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                     "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                     f"form-action 'self' http: https:{native}; frame-ancestors 'none'"},
        )  # fmt: skip

    def _login_form(self, read: ReadRequest, logged_in: str | None = None) -> str:
        """The form: every parameter of the request carried on, the brokers, the password; for
        a person logged in here before, first the one button that allows as them."""
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, values in read.payload.datalist.items()
            if k not in ("broker", "password")
            for v in values
        )
        hint = read.payload.data.get("login_hint")  # the broker a page asks for, preselected
        options = "".join(
            f'<option value="{html.escape(s)}"{" selected" if s == hint else ""}>'
            f"{html.escape(n)} ({html.escape(s)})</option>"
            for s, n in sorted(self.settings.brokers.items())
        )
        action = html.escape(urlsplit(str(read.uri)).path)
        again = (
            f'<form method="post" action="{action}">{hidden}'
            '<input type="hidden" name="continue" value="1">'
            f"<p>You are logged in as <strong>{html.escape(self.settings.brokers[logged_in])}"
            f"</strong> ({html.escape(logged_in)}).</p>"
            f'<button type="submit">Allow as {html.escape(logged_in)}</button></form>'
            "<p>Or log in as another broker:</p>"
            if logged_in is not None
            else ""
        )
        return again + (
            f'<form method="post" action="{action}">{hidden}'
            f'<label for="broker">Broker</label><select id="broker" name="broker">{options}</select>'
            '<label for="password">Password (the demo\'s is printed on the terminal where '
            "<code>omds-ld serve</code> runs)</label>"
            '<input id="password" name="password" type="password" autocomplete="current-password">'
            '<button type="submit">Log in and allow</button></form>'
        )


LOGIN_PAGE = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
    "<meta name='viewport' content='width=device-width, initial-scale=1'>"
    "<title>OMDS LD · log in</title><style>body{{font:15px system-ui;max-width:32rem;"
    "margin:2rem auto;padding:0 1rem}}label,select,input,button{{display:block;width:100%;"
    "margin:.4rem 0}}.error{{color:#a11}}</style></head><body>"
    "<h1>Log in as a broker</h1>{body}</body></html>"
)


# what a self-registered client may say of itself (RFC 7591): each text field, each URI, in all
MAX_TEXT = 200
MAX_REDIRECT_URIS = 10
MAX_METADATA_BYTES = 8 * 1024
MAX_BODY_BYTES = 16 * 1024  # of any request to the authorization server


def _check_metadata(metadata: Mapping[str, Any]) -> None:
    """A self-registered client's metadata within bounds, its redirect URIs admissible."""
    import json

    if len(json.dumps(metadata)) > MAX_METADATA_BYTES:
        raise InvalidClientMetadataError(f"the metadata has at most {MAX_METADATA_BYTES} bytes")
    for key, value in metadata.items():
        if isinstance(value, str) and len(value) > (MAX_URI if key.endswith("uri") else MAX_TEXT):
            raise InvalidClientMetadataError(f"{key} is too long")
    uris = metadata.get("redirect_uris") or []
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise InvalidRedirectURIError(f"name 1 to {MAX_REDIRECT_URIS} redirect_uris")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem:
            raise InvalidRedirectURIError(problem)


def _destination(uri: str) -> str:
    """Where a redirect URI sends the browser, as a person reads it: its scheme and host (and
    port), or the whole URI of a native app's private-use scheme."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return uri[:MAX_TEXT]
    if parts.scheme in ("http", "https") and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}"
    return uri[:MAX_TEXT]


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"
