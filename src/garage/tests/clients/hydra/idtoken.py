#!/usr/bin/env python3
"""Obtain an OpenID Connect ID token from a local Ory Hydra without a browser.

Drives the authorization-code flow with plain HTTP requests and accepts the
login and consent requests through Hydra's admin API. Standard library only.

Prints the raw ID token (a JWT) on stdout. With --decode, also prints the
decoded header/claims of the ID token and the access token on stderr, and
checks the ID token's RS256 signature against /.well-known/jwks.json.

Hydra must be running (see run-hydra.sh), e.g. public 127.0.0.1:4444,
admin 127.0.0.1:4445, with URLS_LOGIN / URLS_CONSENT set to any dummy URL
(they are never loaded: the challenge is read from the Location header).

Usage:
  ./idtoken.py [--public http://127.0.0.1:4444] [--admin http://127.0.0.1:4445]
               [--subject alice] [--username alice] [--client-id garage-oidc]
               [--client-secret ...] [--audience sts.garage] [--decode]
               [--json]   (print the whole token response JSON instead)
"""
import argparse
import base64
import hashlib
import http.cookiejar
import json
import secrets
import sys
import urllib.error
import urllib.parse
import urllib.request

REDIRECT_URI = "http://127.0.0.1:9/callback"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # surface 3xx as HTTPError so we can read Location


def make_opener():
    jar = http.cookiejar.CookieJar()  # Hydra sets CSRF cookies on /oauth2/auth
    return urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(jar), NoRedirect())


def call(opener, method, url, body=None, headers=None, form=False):
    headers = dict(headers or {})
    data = None
    if body is not None:
        if form:
            data = urllib.parse.urlencode(body).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        else:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        resp = opener.open(req, timeout=30)
        return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def expect_redirect(opener, url, param):
    status, headers, body = call(opener, "GET", url)
    loc = headers.get("Location") if headers else None
    if status not in (302, 303) or not loc:
        sys.exit(f"expected redirect from {url}, got {status}: {body[:500]!r}")
    q = urllib.parse.parse_qs(urllib.parse.urlparse(loc).query)
    if "error" in q:
        sys.exit(f"OAuth error in redirect {loc}")
    if param not in q:
        sys.exit(f"no {param} in redirect {loc}")
    return q[param][0], q


def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def decode(jwt):
    h, c, _ = jwt.split(".")
    return json.loads(b64d(h)), json.loads(b64d(c))


def verify_rs256(jwt, jwks):
    """Pure-Python RS256 (RSASSA-PKCS1-v1_5 + SHA-256) check against a JWKS."""
    header, _ = decode(jwt)
    key = next((k for k in jwks["keys"] if k.get("kid") == header["kid"]), None)
    if key is None:
        return f"kid {header['kid']} NOT found in jwks"
    if header["alg"] != "RS256" or key.get("kty") != "RSA":
        return f"cannot check alg {header['alg']} / kty {key.get('kty')}"
    n = int.from_bytes(b64d(key["n"]), "big")
    e = int.from_bytes(b64d(key["e"]), "big")
    signing_input, sig = jwt.rsplit(".", 1)
    k = (n.bit_length() + 7) // 8
    em = pow(int.from_bytes(b64d(sig), "big"), e, n).to_bytes(k, "big")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420")
    digest = hashlib.sha256(signing_input.encode()).digest()
    t = digest_info + digest
    expected = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    return ("signature OK with kid " + header["kid"]) if em == expected else "signature BAD"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--public", default="http://127.0.0.1:4444")
    ap.add_argument("--admin", default="http://127.0.0.1:4445")
    ap.add_argument("--subject", default="alice")
    ap.add_argument("--username", default=None, help="preferred_username claim (default: subject)")
    ap.add_argument("--client-id", default="garage-oidc")
    ap.add_argument("--client-secret", default="garage-oidc-secret-0123456789")
    ap.add_argument("--audience", default="sts.garage", help="access-token audience ('' for none)")
    ap.add_argument("--decode", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    pub, adm = a.public.rstrip("/"), a.admin.rstrip("/")
    username = a.username or a.subject
    audience = [a.audience] if a.audience else []
    op = make_opener()

    # 1. Create (or update) the OAuth2 client through the admin API.
    client = {
        "client_id": a.client_id,
        "client_secret": a.client_secret,
        "grant_types": ["authorization_code", "refresh_token", "client_credentials"],
        "response_types": ["code", "id_token"],
        "scope": "openid offline profile",
        "redirect_uris": [REDIRECT_URI],
        "audience": audience,
        "token_endpoint_auth_method": "client_secret_basic",
    }
    st, _, body = call(op, "POST", f"{adm}/admin/clients", client)
    if st == 409:  # already exists: overwrite it
        st, _, body = call(op, "PUT", f"{adm}/admin/clients/{urllib.parse.quote(a.client_id)}", client)
    if st not in (200, 201):
        sys.exit(f"client create/update failed {st}: {body[:500]!r}")

    # 2. Start the authorization request; Hydra redirects to the login URL.
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    params = {
        "response_type": "code", "client_id": a.client_id, "redirect_uri": REDIRECT_URI,
        "scope": "openid", "state": state, "nonce": nonce,
    }
    if audience:
        params["audience"] = " ".join(audience)
    login_challenge, _ = expect_redirect(
        op, f"{pub}/oauth2/auth?" + urllib.parse.urlencode(params), "login_challenge")

    # 3. Accept the login request as the chosen subject.
    st, _, body = call(op, "PUT", f"{adm}/admin/oauth2/auth/requests/login/accept?"
                       + urllib.parse.urlencode({"login_challenge": login_challenge}),
                       {"subject": a.subject, "remember": False})
    if st != 200:
        sys.exit(f"login accept failed {st}: {body[:500]!r}")
    redirect_to = json.loads(body)["redirect_to"]

    # 4. Follow back to Hydra; it redirects to the consent URL.
    consent_challenge, _ = expect_redirect(op, redirect_to, "consent_challenge")

    # 5. Accept consent, granting openid and adding ID-token claims.
    st, _, body = call(op, "PUT", f"{adm}/admin/oauth2/auth/requests/consent/accept?"
                       + urllib.parse.urlencode({"consent_challenge": consent_challenge}),
                       {"grant_scope": ["openid"], "grant_access_token_audience": audience,
                        "remember": False,
                        "session": {"id_token": {"preferred_username": username}}})
    if st != 200:
        sys.exit(f"consent accept failed {st}: {body[:500]!r}")
    redirect_to = json.loads(body)["redirect_to"]

    # 6. Follow back to Hydra; it redirects to the callback with ?code=.
    code, q = expect_redirect(op, redirect_to, "code")
    if q.get("state", [None])[0] != state:
        sys.exit("state mismatch")

    # 7. Exchange the code at the token endpoint (client_secret_basic).
    basic = base64.b64encode(
        f"{urllib.parse.quote(a.client_id, safe='')}:{urllib.parse.quote(a.client_secret, safe='')}"
        .encode()).decode()
    st, _, body = call(op, "POST", f"{pub}/oauth2/token",
                       {"grant_type": "authorization_code", "code": code,
                        "redirect_uri": REDIRECT_URI},
                       headers={"Authorization": "Basic " + basic}, form=True)
    if st != 200:
        sys.exit(f"token exchange failed {st}: {body[:500]!r}")
    tok = json.loads(body)
    id_token = tok["id_token"]
    if decode(id_token)[1].get("nonce") != nonce:
        sys.exit("nonce mismatch")

    if a.decode:
        _, _, jb = call(op, "GET", f"{pub}/.well-known/jwks.json")
        jwks = json.loads(jb)
        for name in ("id_token", "access_token"):
            t = tok.get(name, "")
            if t.count(".") == 2:
                h, c = decode(t)
                print(f"--- {name}: {verify_rs256(t, jwks)}", file=sys.stderr)
                print(json.dumps({"header": h, "claims": c}, indent=2), file=sys.stderr)
            else:
                print(f"--- {name}: opaque {t[:20]}...", file=sys.stderr)
    print(json.dumps(tok) if a.json else id_token)


if __name__ == "__main__":
    main()
