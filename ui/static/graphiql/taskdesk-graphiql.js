// Starts the vendored GraphiQL on the page /graphql serves (schema/graphiql.py).
// Every script comes from /static: the IDE must work on a network without internet.
// Requests are same-origin JSON POSTs, so the browser sends the session cookie by itself;
// JSON with Content-Type: application/json is what keeps cookie calls CSRF-safe (a foreign
// page cannot send it without a CORS preflight, which is never granted).
(function () {
  "use strict";
  var root = document.getElementById("graphiql");
  var shared = new URLSearchParams(window.location.search).get("query");
  var fetcher = GraphiQL.createFetcher({ url: root.dataset.endpoint });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: root.dataset.query,
      query: shared || undefined,
      defaultEditorToolsVisibility: true,
      isHeadersEditorEnabled: true,
      // A pasted API token stays in this tab only, never in localStorage.
      shouldPersistHeaders: false,
    })
  );
})();
