"""The GraphiQL page that GET /graphql serves outside production, built on vendored files.

Every script and style comes from `/static/graphiql/` (ui/static/graphiql/README.md lists the
pinned versions), so the IDE works on a network without internet; the page itself holds no
inline script, only data attributes that `taskdesk-graphiql.js` reads.
"""

from __future__ import annotations

from html import escape

ASSETS = "/static/graphiql"
VERSION = "3.8.3"  # graphiql's; bump with the files so browsers do not keep stale copies

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{assets}/graphiql.min.css?v={version}">
<style>body {{ margin: 0; overflow: hidden; }} #graphiql {{ height: 100vh; }}</style>
</head>
<body>
<div id="graphiql" data-endpoint="{endpoint}" data-query="{query}">Loading GraphiQL…</div>
<script src="{assets}/react.production.min.js?v=18.3.1"></script>
<script src="{assets}/react-dom.production.min.js?v=18.3.1"></script>
<script src="{assets}/graphiql.min.js?v={version}"></script>
<script src="{assets}/taskdesk-graphiql.js?v={version}"></script>
</body>
</html>
"""


def page(*, title: str, endpoint: str, query: str) -> str:
    """The IDE page: `query` is the editor's text on a first visit (escaped here)."""
    return PAGE.format(
        title=escape(title),
        assets=ASSETS,
        version=VERSION,
        endpoint=escape(endpoint),
        query=escape(query),
    )
