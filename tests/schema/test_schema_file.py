"""`schema.graphql` is the code's schema, and production serves the same one."""

from schema.__main__ import SDL_FILE, sdl
from schema.root import build_schema


def test_checked_in_schema_matches_the_code() -> None:
    assert SDL_FILE.read_text(encoding="utf-8") == sdl(), (
        "schema.graphql is stale: run `python -m schema` and commit the result"
    )


def test_production_schema_is_the_same() -> None:
    assert build_schema(prod=True).as_str() == build_schema(prod=False).as_str()
