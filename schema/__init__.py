"""The GraphQL API (Strawberry): `schema.root.build_schema()` assembles it from one module per
domain, `schema.app.graphql_router()` serves it at /graphql. It calls desk/ for every rule."""
