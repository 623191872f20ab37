# Chinese titles use full-width punctuation on purpose.
# ruff: noqa: RUF001
"""Ticket search (issue 11): every word finds exactly what `title ILIKE` finds, through an index
(trigrams for Latin words, the bigram index of migration 0010 for 退款 and other short words),
and the count is capped and only taken when asked for."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from desk.helpdesk import tickets
from desk.helpdesk.filters import like_pattern, needs_bigrams, parse_filter
from tests.factories import add_ticket

TITLES = (
    "订单#42的退款还没有到账",
    "退款申请：发票抬头错误",
    "退货不退款",
    "无法登录，一直提示密码错误",
    "Refund not received for order #42",
    "INVOICE #77 shows the wrong VAT",
    "Need an invoice copy",
    "Feature request: Dark Mode for the app",
    "darkmode is not dark mode",
    "50% off promo_code broken",
    "Path C:\\temp\\x fails",
    "Café opens at 9 — ÉTÉ",
    "Emoji 🙂 in title",
    "O'Brien can't log in",
    "a",
    "ab",
)
WORDS = (
    "退款",
    "退",
    "款还",
    "invoice",
    "INVOICE",
    "Invoice #",
    "in",
    "i",
    "k m",
    "dark mode",
    "Dark",
    "50%",
    "%",
    "_",
    "promo_code",
    "\\",
    "C:\\temp",
    "é",
    "ÉTÉ",
    "🙂",
    "O'B",
    "订单#42",
    "#42",
    "zz",
    "ab",
)


async def _truth(rt, team: int, q: str) -> set[int]:
    """What plain ILIKE finds (no index involved)."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT id FROM ticket WHERE team_id = :t AND title ILIKE :p"),
            {"t": team, "p": like_pattern(q)},
        )
        return {r.id for r in rows}


def _plan(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))


@pytest.fixture
async def titled(rt, world) -> None:
    for title in TITLES:
        await add_ticket(rt, world.team, world.customer, title)
    await add_ticket(rt, world.other_team, world.outsider, "退款 elsewhere")


@pytest.mark.parametrize("q", WORDS)
async def test_every_word_finds_what_ilike_finds(rt, world, titled, q) -> None:
    truth = await _truth(rt, world.team, q)
    page = await tickets.list_tickets(rt, world.staff, world.team, parse_filter({"q": q}))
    assert {t.id for t in page.items} == truth, q
    assert page.total == len(truth) and page.total_exact
    if q.isascii():  # ASCII case folding is the same in Python and in any PostgreSQL locale
        assert truth == {t.id for t in page.items if q.lower() in t.title.lower()}


async def test_the_bigram_index_path_finds_the_same(rt, world, titled, db_url) -> None:
    """Read through ticket_title_bigrams (sequential scans off; checked in the plan), every word
    the trigram index cannot serve still finds exactly what ILIKE finds: no true match is lost
    to the index's lower-casing or to odd characters."""
    # OFFSET 0 keeps ILIKE out of the scan, so the bigram index is the only one that applies.
    sql = (
        "SELECT id FROM (SELECT id, title FROM ticket t "
        "WHERE taskdesk_bigrams(t.title) @> taskdesk_bigrams(%(q_text)s) OFFSET 0) s "
        "WHERE s.title ILIKE %(q)s"
    )
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        for q in WORDS:
            if not needs_bigrams(q):
                continue
            params = {"q": like_pattern(q), "q_text": q}
            plan = _plan(conn, sql, params)
            assert "ticket_title_bigrams" in plan, (q, plan)
            found = {r[0] for r in conn.execute(sql, params)}
            truth = {
                r[0]
                for r in conn.execute("SELECT id FROM ticket WHERE title ILIKE %s", [params["q"]])
            }
            assert found == truth, q


def test_which_words_need_bigrams() -> None:
    assert needs_bigrams("退款") and needs_bigrams("ab") and needs_bigrams("k m")
    assert needs_bigrams("订单#42") and needs_bigrams("invoice 退款")
    assert not needs_bigrams("invoice") and not needs_bigrams("order #42")
    assert not needs_bigrams("a") and not needs_bigrams("退")  # no bigram at all: ILIKE alone


async def test_latin_and_chinese_words_are_searched_through_an_index(rt, world, db_url) -> None:
    """On tables large enough for the planner to care, neither the count nor the page of a
    Latin word or of 退款 reads the whole table: the titles and the messages (`q` reads both)
    are each searched through their index."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO ticket (team_id, title, status, priority, creator_id) "
            "SELECT %(t)s, CASE WHEN g %% 500 = 0 THEN '订单' || g || '的退款还没有到账' "
            " WHEN g %% 500 = 1 THEN 'Invoice #' || g || ' is wrong' "
            " ELSE 'Ticket number ' || g || ' about ' || md5(g::text) END, "
            " 'OPEN', 'NORMAL', %(c)s FROM generate_series(1, 60000) g",
            {"t": world.team, "c": world.customer},
        )
        conn.execute(
            "INSERT INTO ticket_message (ticket_id, team_id, author_id, body, created_at) "
            "SELECT id, team_id, creator_id, CASE WHEN id % 700 = 0 THEN '退款 and invoice' "
            " ELSE 'Message about ' || md5(id::text) END, created_at FROM ticket"
        )
        conn.execute("ANALYZE ticket")
        conn.execute("ANALYZE ticket_message")
        for q, index, body_index in (
            ("退款", "ticket_title_bigrams", "ticket_message_body_bigrams"),
            ("invoice", "ticket_title_trgm", "ticket_message_body_trgm"),
        ):
            count, page, params = tickets.list_sql(
                parse_filter({"q": q}),
                team_id=world.team,
                user_id=world.staff,
                staff=True,
                first=50,
            )
            count_plan = _plan(conn, count, params)
            assert index in count_plan and body_index in count_plan, (q, count_plan)
            assert "Seq Scan" not in count_plan, (q, count_plan)
            page_plan = _plan(conn, page, params)
            assert "Seq Scan" not in page_plan, (q, page_plan)
        # Without the bigram condition, 退款 has no index to use: the plan above is ours.
        plain = "SELECT count(*) FROM ticket WHERE team_id = %(t)s AND title ILIKE '%%退款%%'"
        assert "Seq Scan" in _plan(conn, plain, {"t": world.team})


async def test_the_count_stops_at_the_cap(rt, world, titled, monkeypatch) -> None:
    monkeypatch.setattr(tickets, "COUNT_CAP", 2)
    page = await tickets.list_tickets(rt, world.staff, world.team, parse_filter({"q": "退款"}))
    assert page.total == 2 and not page.total_exact and len(page.items) == 3
    page = await tickets.list_tickets(rt, world.staff, world.team, parse_filter({"q": "款还"}))
    assert page.total == 1 and page.total_exact
    page = await tickets.list_tickets(
        rt, world.staff, world.team, parse_filter({"q": "退款"}), count=False
    )
    assert page.total is None and len(page.items) == 3


async def test_customers_search_only_their_own(rt, world, titled) -> None:
    await add_ticket(rt, world.team, world.customer2, "退款 for the other customer")
    f = parse_filter({"q": "退款"})
    mine = await tickets.list_tickets(rt, world.customer, world.team, f)
    assert mine.total == 3 and all(t.creator_id == world.customer for t in mine.items)
    staff = await tickets.list_tickets(rt, world.staff, world.team, f)
    assert staff.total == 4
