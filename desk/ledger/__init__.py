"""The task ledger: every SQL statement that accepts, sends, claims, runs, finishes, rescues or prunes a task, the lanes, the event log and what a task offers."""
