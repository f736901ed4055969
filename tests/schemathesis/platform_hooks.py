"""Schemathesis hooks for the platform's contract run (tests/tests/platform/api_contract.rs).

- Signs the tenant server's requests: an operation whose security names the `signature`
  scheme gets the placeholder credential from the config; here the placeholder is replaced,
  on the request as it leaves (final method, path-and-query and body bytes), by a fresh
  X-Timestamp and the HMAC-SHA256 the platform verifies. Each signature is accepted once, so
  every signed request carries a unique `nonce` query parameter, as the README advises.
- Gives each tier its credential: the identities schemathesis tries are the two users
  (`alice`, `bob`, the peers of its object-level authorization check); on an operation of
  the server, admin, jobs, SFU or media tier, a user's own credential is exchanged (bob's for a
  second tenant's server, so that tenants are peers too), as the request
  leaves, for that tier's (and only a user's: stripped or altered credentials stay as
  schemathesis made them, so `ignored_auth` still sees what it sent).
- Deletes a throwaway user, never a fixture: `DELETE /api/users/profile` and password
  changes run as a user signed up for that one request.
"""

import base64
import hashlib
import hmac
import itertools
import json
import os
import re
import time
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import requests
import schemathesis

SECRET = os.environ["PLATFORM_SECRET_KEY"]
API_KEY = os.environ["PLATFORM_API_KEY"]
BASE = os.environ["PLATFORM_BASE"]
PLACEHOLDER = "sign-me"
_nonce = itertools.count()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _sign_sfu_webhook(request: requests.PreparedRequest) -> None:
    """LiveKit's webhook signature: an HS256 JWT by the SFU API key whose `sha256` claim is the
    body's digest."""
    body = request.body or b""
    if isinstance(body, str):
        body = body.encode()
    now = int(time.time())
    claims = {
        "iss": os.environ["PLATFORM_SFU_KEY"],
        "nbf": now - 5,
        "exp": now + 300,
        "sha256": base64.b64encode(hashlib.sha256(body).digest()).decode(),
    }
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps(claims).encode())
    mac = hmac.new(os.environ["PLATFORM_SFU_SECRET"].encode(), f"{head}.{payload}".encode(), hashlib.sha256)
    request.headers["Authorization"] = f"Bearer {head}.{payload}.{_b64url(mac.digest())}"


SECRETS = {PLACEHOLDER: SECRET, f"{PLACEHOLDER}-other": os.environ["PLATFORM_OTHER_SECRET_KEY"]}


def _sign(request: requests.PreparedRequest) -> None:
    if request.headers.get("Authorization") == f"Bearer sfu-{PLACEHOLDER}":
        _sign_sfu_webhook(request)
    secret = SECRETS.get(request.headers.get("X-Signature"))
    if secret is None:
        return
    parts = urlsplit(request.url)
    query = f"{parts.query}&" if parts.query else ""
    query += f"nonce={os.getpid()}-{next(_nonce)}"
    request.url = urlunsplit(parts._replace(query=query))
    target = f"{parts.path}?{query}"
    body = request.body or b""
    if isinstance(body, str):
        body = body.encode()
    timestamp = str(int(time.time()))
    message = request.method.encode() + target.encode() + body + timestamp.encode()
    request.headers["X-Timestamp"] = timestamp
    request.headers["X-Signature"] = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


_send = requests.Session.send


def _signing_send(self, request, **kwargs):
    _tier_credentials(request)
    _sign(request)
    return _send(self, request, **kwargs)


requests.Session.send = _signing_send

_throwaway = itertools.count()
DESTRUCTIVE = {("DELETE", "/api/users/profile"), ("POST", "/api/users/change-password")}


def _fresh_user_token() -> str:
    name = f"throwaway{os.getpid()}x{next(_throwaway)}"
    body = json.dumps({"username": name, "email": f"{name}@example.com", "password": "correct horse battery"}).encode()
    req = urllib.request.Request(
        f"{BASE}/api/users/signup",
        data=body,
        headers={"content-type": "application/json", "x-api-key": API_KEY},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as answer:
        return json.load(answer)["token"]


ALICE = f"Bearer {os.environ['PLATFORM_ALICE_TOKEN']}"
BOB = f"Bearer {os.environ['PLATFORM_BOB_TOKEN']}"
USER_BEARERS = {ALICE, BOB}


def _load_tiers():
    """(method, path regex, parameter count, tier) of every operation of the document."""
    with urllib.request.urlopen(f"{BASE}/api/openapi.json", timeout=30) as answer:
        doc = json.load(answer)
    tiers = []
    for path, item in doc["paths"].items():
        pattern = re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$")
        for method, op in item.items():
            tiers.append((method.upper(), pattern, path.count("{"), op.get("x-tier")))
    return tiers


TIERS = _load_tiers()


def _tier_of(method: str, path: str):
    """The tier of the most specific operation matching (literal segments win)."""
    found = [(n, tier) for m, pattern, n, tier in TIERS if m == method and pattern.match(path)]
    return min(found)[1] if found else None


def _apply_tier(headers, tier) -> None:
    """Exchanges a user's credential in `headers` for the one `tier` takes."""
    if headers.get("Authorization") not in USER_BEARERS:
        return
    if tier == "server":
        # bob's server is another tenant's: the object-level check then holds tenants apart.
        bob = headers.pop("Authorization") == BOB
        if bob:
            headers["X-API-Key"] = os.environ["PLATFORM_OTHER_API_KEY"]
        headers["X-Signature"] = f"{PLACEHOLDER}-other" if bob else PLACEHOLDER
        headers["X-Timestamp"] = "0"
    elif tier == "admin":
        headers["Authorization"] = f"Bearer {os.environ['PLATFORM_ADMIN_TOKEN']}"
    elif tier == "jobs":
        headers["Authorization"] = f"Bearer {os.environ['PLATFORM_JOBS_TOKEN']}"
    elif tier == "sfu":
        headers["Authorization"] = f"Bearer sfu-{PLACEHOLDER}"
    elif tier == "media":
        headers.pop("Authorization")
        headers["X-Media-Secret"] = os.environ["PLATFORM_MEDIA_SECRET"]


def _tier_credentials(request: requests.PreparedRequest) -> None:
    """On the wire too, so that requests schemathesis sends without the hook (its
    authorization probes replay a case as the other user) get it as well."""
    _apply_tier(request.headers, _tier_of(request.method, urlsplit(request.url).path))


@schemathesis.hook
def before_call(context, case, kwargs):
    # On the case, so that schemathesis judges the request with the credentials it carries.
    if case.headers is not None:
        _apply_tier(case.headers, case.operation.definition.raw.get("x-tier"))
    if (case.method.upper(), case.operation.path) in DESTRUCTIVE:
        auth = (case.headers or {}).get("Authorization", "")
        if auth.startswith("Bearer ") and auth != "Bearer " and case.headers.get("X-API-Key") == API_KEY:
            case.headers["Authorization"] = f"Bearer {_fresh_user_token()}"
