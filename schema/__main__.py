"""`python -m schema` writes `schema.graphql` (the checked-in SDL) from the code's schema."""

from __future__ import annotations

from pathlib import Path

from schema.root import build_schema

SDL_FILE = Path(__file__).resolve().parent.parent / "schema.graphql"


def sdl() -> str:
    return build_schema().as_str() + "\n"


if __name__ == "__main__":
    SDL_FILE.write_text(sdl(), encoding="utf-8")
    print(f"wrote {SDL_FILE}")
