"""The page watcher and the polled fragments (docs/architecture.md, "Polling"), one package so that
where a change to polling belongs is one place:

- `polling`: a row's schedule (1, 1, 2, 2, 5, 5, 5, then every 10 s), the watcher's tick built
  from it and a row's version;
- `watched`: the rows a page watches, as it sends them (`id:since:version:cancel`);
- `unchanged`: the unchanged tick, answered from the memory of the change feed;
- `watcher`: `GET /watch` itself;
- `polled_route`, `polled`: the two polled routes' one handler each (the watcher's and the htmx
  row's, `ui.tasks_routes.polled_row`), called by the edge before any routing.

Lower modules never import higher ones (pyproject.toml's contract): `watcher` reads `unchanged`,
both read `watched` and `polling`, and nothing here imports `watcher` but `polled`. Importing the
package imports none of them (ui.render reads only `polling`).
"""
