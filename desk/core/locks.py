"""Every PostgreSQL advisory lock class taskdesk takes, in one list, so no two rules share one by
accident (a shared class only makes one wait on the other, but it hides which is which in
`pg_locks`). Two-key locks are `(class, key)`; the person's accept lock hashes its text key
with its class as the seed."""

TEAM_TASKS = 7341  # (class, team id): a team's task admission (desk/ledger/accept.py)
IDEMPOTENCY_KEY = 7342  # (class, hash of the key): one accept per idempotency key
PERSON_ACCEPT = 7343  # hashtextextended('accept:team:owner', class): one person's accepts in turn
EXPORT_SLOT = 7344  # (class, slot): one CSV build per slot (desk/work/exports.py)
EXPORT_QUEUE = 7345  # (class, 0): writers waiting for a build slot, in turn
LONG_LANE_TEAM = 7346  # (class, team id): a team's count of running long tasks stays exact
