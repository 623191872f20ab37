"""The task kinds as people start and follow them: exports, reminders, and the generic start/cancel/retry of a task."""
