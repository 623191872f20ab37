"""search bigrams: two-character words (退款) found through an index; export chunks stored lz4

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 17:00:00

pg_trgm cannot serve a search word shorter than three characters, nor a Chinese word in a
database whose ctype is C (it only sees ASCII letters and digits as word characters), so
`title ILIKE '%退款%'` was a sequential scan of the whole table (273 ms on 1M tickets).
pg_bigm is not available here, so a bigram index is built from plain SQL: an IMMUTABLE
function giving a title's lower-cased character pairs, and a GIN index on it. The ticket list
adds `taskdesk_bigrams(title) @> taskdesk_bigrams(q)` for such words (desk/helpdesk/filters.py); the
exact `ILIKE` stays, so results never depend on the index. `ILIKE` compares `lower()` of both
sides, the same `lower()` the function applies, so every true match passes the bigram test.

Cost: building the index reads every ticket once and blocks writes to `ticket` meanwhile
(measured on 1M tickets: see bench/README.md, "Search and export (issue 11)").

Export chunks: the worker asked for lz4 TOAST compression in every chunk's transaction; the
column now carries it (PostgreSQL >= 14 built with lz4; otherwise left as it is).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# No DISTINCT: GIN keeps each key of an item once anyway, and sorting here costs per row.
BIGRAMS = r"""
CREATE OR REPLACE FUNCTION taskdesk_bigrams(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT ARRAY(
    SELECT substr(l, i, 2) FROM (SELECT lower(t) AS l) s, generate_series(1, char_length(l) - 1) i
  )
$$
"""

LZ4 = r"""
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_settings
             WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) THEN
    ALTER TABLE task_result_chunk ALTER COLUMN data SET COMPRESSION lz4;
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(BIGRAMS)
    op.execute(
        "CREATE INDEX ticket_title_bigrams ON ticket USING gin (taskdesk_bigrams(title))"
    )
    op.execute(LZ4)


def downgrade() -> None:
    op.execute("ALTER TABLE task_result_chunk ALTER COLUMN data SET COMPRESSION default")
    op.execute("DROP INDEX IF EXISTS ticket_title_bigrams")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_bigrams(text)")
