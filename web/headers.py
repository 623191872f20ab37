"""Security headers on every answer: no framing (clickjacking), no MIME sniffing, and a Content
Security Policy the pages satisfy — they load only their own scripts and styles from /static
and use no inline script, inline style or eval (htmx runs with `allowEval: false`).

GraphiQL (`GET /graphql`, outside production only, and its files under /static/graphiql/) is
the one page with inline style, so it gets a policy of its own that still forbids framing and
allows nothing off-site (it must work on a network without internet); production serves
neither it nor the API docs, so every production answer gets the pages' strict policy.

web/edge.py puts them on every answer (built once per policy); the in-flight refusal
(web/overload.py) carries COMMON with a policy of its own.
"""

from __future__ import annotations

PAGES_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# GraphiQL's scripts are vendored under /static/graphiql (no inline script, nothing off-site);
# GraphiQL and its editor set inline styles, and the page has one small <style>.
GRAPHIQL_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
GRAPHIQL_FILES = "/static/graphiql/"
# FastAPI's own API docs (dev and test only: production serves none) load from a CDN.
API_DOCS = frozenset({"/docs", "/redoc"})
API_DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly; "
    "font-src 'self' https://fonts.gstatic.com; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
COMMON = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
HSTS = (b"strict-transport-security", b"max-age=31536000")


def policy(path: str) -> str:
    """The policy an answer to `path` gets outside production (production: PAGES_CSP)."""
    if path == "/graphql" or path.startswith(GRAPHIQL_FILES):
        return GRAPHIQL_CSP
    return API_DOCS_CSP if path in API_DOCS else PAGES_CSP
