"""People and what they may do: accounts, sign-in and sessions, team membership, the visibility rules, rate limits, the site operators and the audit trail."""
