"""The hot read paths both faces poll: a session's viewer, one task, a team's task list, the page watcher's tick, GraphQL batch lookups."""
