"""Production answers (issue 12, point 10): Secure cookies, no framing, nosniff, a CSP the pages
satisfy; /health detail and /metrics for operators only; redirects only to a path on this
site."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from api.app import create_app
from desk.core.settings import ConfigError, load_settings
from desk.people.passwords import hash_password
from tests.sessions import signed_in
from ui.viewer import safe_next

PROD = {"taskdesk_env": "prod", "secret_key": "a-long-production-secret-0123456789"}
TEMPLATES = Path(__file__).resolve().parents[2] / "ui" / "templates"
Web = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
def web(settings, clock, world) -> Web:
    @asynccontextmanager
    async def factory(
        ip: str = "192.0.2.1", **overrides: object
    ) -> AsyncIterator[httpx.AsyncClient]:
        app = create_app(load_settings(**(settings.model_dump() | overrides)))
        async with app.router.lifespan_context(app):
            app.state.runtime.clock = clock
            transport = httpx.ASGITransport(app=app, client=(ip, 40000))
            async with httpx.AsyncClient(transport=transport, base_url="https://test") as c:
                c.settings = app.state.settings  # type: ignore[attr-defined]
                yield c

    return factory


def cookies_of(r: httpx.Response) -> dict[str, str]:
    return {h.split("=", 1)[0]: h for h in r.headers.get_list("set-cookie")}


async def test_prod_cookies_are_secure_and_pages_cannot_be_framed(web, rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET password_hash = :h"), {"h": hash_password("pw-123456")}
        )
        await conn.execute(
            sa.text("INSERT INTO membership (team_id, user_id, role) SELECT team_id, :u, 'STAFF' "
                    "FROM membership WHERE user_id = :o"),
            {"u": world.staff, "o": world.outsider},
        )  # fmt: skip
    async with web(**PROD) as c:
        r = await c.get("/login")
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        csp = r.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in csp and "script-src 'self';" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "; Secure" in cookies_of(r)["taskdesk_login"]
        token = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
        r = await c.post(
            "/login",
            data={"csrf_token": token, "email": "chen@acme.test", "password": "pw-123456"},
        )
        assert r.status_code == 303 and "; Secure" in cookies_of(r)["taskdesk_session"]
        page = (await c.get("/tickets")).text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        r = await c.post("/team", data={"csrf_token": csrf, "team_id": str(world.team)})
        assert r.status_code == 303 and "; Secure" in cookies_of(r)["taskdesk_team"]
        r = await c.post("/logout", data={"csrf_token": csrf})
        assert "; Secure" in cookies_of(r)["taskdesk_session"]  # the deletion, too
        assert (await c.get("/docs")).status_code == 404  # no API docs in production
        assert (await c.get("/openapi.json")).status_code == 404
        for url in ("/health", "/static/ui.css", "/nowhere"):
            r = await c.get(url)
            assert r.headers["x-content-type-options"] == "nosniff", url
            assert r.headers["x-frame-options"] == "DENY", url


INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "inline <script>"),
    (re.compile(r"<style\b", re.I), "<style> element"),
    (re.compile(r"\sstyle\s*=", re.I), "style attribute"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "on* handler attribute"),
    (re.compile(r"hx-on|hx-vals\s*=\s*['\"]js:|javascript:", re.I), "evaluated script"),
]


def inline_code(html: str) -> list[str]:
    return [what for pattern, what in INLINE if pattern.search(html)]


def test_templates_need_nothing_the_csp_forbids() -> None:
    for template in TEMPLATES.glob("**/*.html"):
        assert inline_code(template.read_text()) == [], template.name
    base = (TEMPLATES / "base.html").read_text()
    # htmx would otherwise eval trigger filters and insert its own <style>.
    assert '"allowEval":false' in base and '"includeIndicatorStyles":false' in base


async def test_rendered_pages_need_nothing_the_csp_forbids(web, world) -> None:
    async with web() as c:
        cookie, _ = signed_in(c.settings, world.admin)
        c.cookies.set("taskdesk_session", cookie)
        urls = ["/tickets", f"/tickets/{world.tickets['login']}", "/tasks", "/members",
                "/tokens", "/imports", "/notifications", "/tickets/new",
                "/settings/notifications"]  # fmt: skip
        for url in urls:
            r = await c.get(url)
            assert r.status_code == 200, url
            assert inline_code(r.text) == [], url
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


async def test_health_detail_and_metrics_are_for_operators_only(web) -> None:
    async with web(**PROD) as c:
        r = await c.get("/health")
        assert r.text in ("ok", "unavailable") and "worker" not in r.text
        assert (await c.get("/metrics")).status_code == 404
    token = "ops-token-0123456789abcdef"
    async with web(**PROD, ops_token=token) as c:
        assert (await c.get("/health")).text in ("ok", "unavailable")
        wrong = {"Authorization": "Bearer not-the-token-at-all"}
        assert (await c.get("/metrics", headers=wrong)).status_code == 404
        ops = {"Authorization": f"Bearer {token}"}
        assert "workers" in (await c.get("/health", headers=ops)).json()
        r = await c.get("/metrics", headers=ops)
        assert r.status_code == 200 and "taskdesk_" in r.text
    async with web("10.1.2.3", **PROD, ops_allowed_addresses="10.0.0.0/8, 127.0.0.1") as c:
        assert "workers" in (await c.get("/health")).json()
        assert (await c.get("/metrics")).status_code == 200
    async with web("192.0.2.50", **PROD, ops_allowed_addresses="10.0.0.0/8") as c:
        assert (await c.get("/health")).text in ("ok", "unavailable")
    with pytest.raises(ConfigError, match="OPS_ALLOWED_ADDRESSES"):
        load_settings(ops_allowed_addresses="10.0.0.0/8,not-an-address")
    with pytest.raises(ConfigError, match="OPS_TOKEN"):
        load_settings(ops_token="short")


@pytest.mark.parametrize(
    "value",
    ["//evil.example", "/\\evil.example", "\\\\evil.example", "https://evil.example/x",
     "/\t/evil.example", "/tickets\r\nSet-Cookie: x=1", "/tickets\x00", "/x\x7f", "/\u2028x",
     "tickets", "", "/login?next=/x"],
)  # fmt: skip
def test_next_is_only_ever_a_path_on_this_site(value: str) -> None:
    assert safe_next(value) == "/tickets"


async def test_hx_redirect_never_carries_a_foreign_or_broken_next(web, world) -> None:
    async with web() as c:
        cookie, _ = signed_in(c.settings, world.staff)
        c.cookies.set("taskdesk_session", cookie)
        for bad in ("/tickets\r\nX-Evil: 1", "/\t/evil.example", "//evil.example"):
            r = await c.get("/login", params={"next": bad}, headers={"HX-Request": "true"})
            assert r.status_code == 204 and r.headers["HX-Redirect"] == "/tickets", bad
            assert "x-evil" not in r.headers
        good = "/tickets?q=a b&status=OPEN"
        r = await c.get("/login", params={"next": good}, headers={"HX-Request": "true"})
        assert r.headers["HX-Redirect"] == good


async def test_graphiql_gets_its_own_policy_and_still_cannot_be_framed(web) -> None:
    async with web() as c:  # dev/test: GraphiQL is served
        r = await c.get("/graphql", headers={"Accept": "text/html"})
        assert r.status_code == 200
        csp = r.headers["content-security-policy"]
        assert "'unsafe-inline'" in csp and "frame-ancestors 'none'" in csp
        # Its files are vendored: nothing off-site, and no inline script to allow.
        assert "https:" not in csp and "script-src 'self';" in csp, csp
        assert r.headers["x-frame-options"] == "DENY"
        pages = (await c.get("/login")).headers["content-security-policy"]
        assert "'unsafe-inline'" not in pages


async def test_prod_answers_never_allow_inline_script(web) -> None:
    # GraphiQL and the API docs are not served in production, so their looser policy must not
    # be either: /docs is the app's own 404 page there, /graphql its 405 for a GET.
    async with web(**PROD) as c:
        for path in ("/graphql", "/docs", "/redoc", "/static/graphiql/x.js"):
            r = await c.get(path, headers={"Accept": "text/html"})
            csp = r.headers["content-security-policy"]
            assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp, (path, csp)


async def test_a_non_ascii_next_is_percent_encoded_not_a_500(web, world) -> None:
    # Headers are latin-1: `日本` (or the U+FFFD a broken %ED%A0%80 decodes to) cannot go raw.
    async with web() as c:
        cookie, _ = signed_in(c.settings, world.staff)
        c.cookies.set("taskdesk_session", cookie)
        for raw in ("/tickets?q=日本", "/tickets?q=%ED%A0%80"):
            r = await c.get(f"/login?next={raw}", headers={"HX-Request": "true"})
            assert r.status_code == 204, (raw, r.status_code)
            assert r.headers["HX-Redirect"].startswith("/tickets?q=%"), r.headers["HX-Redirect"]
        r = await c.get(
            "/login", params={"next": "/tickets?q=日本"}, headers={"HX-Request": "true"}
        )
        assert r.headers["HX-Redirect"] == "/tickets?q=%E6%97%A5%E6%9C%AC"
