"""What operators see and do: health, the console's overview and failure groups, the ledger administration behind `taskdesk tasks`."""
