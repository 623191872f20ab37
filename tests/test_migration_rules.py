"""The expand/contract rule every migration follows (docs/architecture.md, "Migrations"), checked
on the migration files: a release's migrations only expand the schema — add tables, nullable
columns or columns with a server default, indexes, functions, looser constraints — so the
previous release's web and workers keep running against the new schema during a rolling deploy.
What removes or narrows something (a dropped or renamed column or table, a new NOT NULL without
a default, a changed type) is a contract step: it is allowed only in a migration that says so
with `CONTRACT = "..."`, naming the earlier release after which nothing reads the old shape."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

VERSIONS = Path(__file__).resolve().parent.parent / "migrations" / "versions"
RAW_CONTRACT = re.compile(
    r"\b(DROP\s+(COLUMN|TABLE)|RENAME\s+(COLUMN|TO)|SET\s+NOT\s+NULL|ALTER\s+COLUMN\s+\w+\s+TYPE)\b",
    re.IGNORECASE,
)


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _column_is_required(node: ast.expr) -> bool:
    """An `sa.Column(..., nullable=False)` without server_default (and not a primary key)."""
    if not isinstance(node, ast.Call):
        return False
    return (
        _is_false(_keyword(node, "nullable"))
        and _keyword(node, "server_default") is None
        and _keyword(node, "primary_key") is None
    )


def contract_steps(source: str) -> list[str]:
    """What upgrade() does that is not an expansion, each as a short description."""
    tree = ast.parse(source)
    upgrade = next(
        (f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "upgrade"), None
    )
    if upgrade is None:
        return []
    found = []
    for node in ast.walk(upgrade):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        op = node.func.attr
        if op in ("drop_column", "drop_table", "rename_table"):
            found.append(op)
        elif op == "alter_column" and (
            _is_false(_keyword(node, "nullable"))
            or _keyword(node, "new_column_name") is not None
            or _keyword(node, "type_") is not None
        ):
            found.append("alter_column narrowing or renaming")
        elif op == "add_column" and any(_column_is_required(a) for a in node.args):
            found.append("add_column NOT NULL without a server default")
        elif op == "execute":
            for arg in ast.walk(node):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    m = RAW_CONTRACT.search(arg.value)
                    if m:
                        found.append(f"SQL {m.group(0)!r}")
    return found


def _declares_contract(source: str) -> bool:
    tree = ast.parse(source)
    return any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "CONTRACT" for t in n.targets)
        for n in tree.body
    )


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.stem)
def test_every_migration_only_expands_unless_it_says_contract(path: Path) -> None:
    source = path.read_text()
    steps = contract_steps(source)
    assert not steps or _declares_contract(source), (
        f"{path.name} removes or narrows the schema ({', '.join(steps)}): the previous release's "
        "processes still run against it during a rolling deploy. Split it: expand now (add the "
        "new shape, keep the old one), contract in a later release, in a migration that says "
        'CONTRACT = "<why nothing reads the old shape any more>" (docs/architecture.md, '
        '"Migrations").'
    )


@pytest.mark.parametrize(
    "step",
    [
        'op.drop_column("ticket", "body")',
        'op.alter_column("ticket", "title", nullable=False)',
        'op.alter_column("ticket", "body", new_column_name="text")',
        'op.add_column("ticket", sa.Column("x", sa.Integer(), nullable=False))',
        'op.execute("ALTER TABLE ticket DROP COLUMN body")',
        'op.execute("ALTER TABLE ticket ALTER COLUMN title SET NOT NULL")',
        'op.rename_table("ticket", "tickets")',
    ],
)
def test_the_check_sees_each_kind_of_contract(step: str) -> None:
    source = f"def upgrade() -> None:\n    {step}\n"
    assert contract_steps(source), step
    assert not _declares_contract(source)
    assert _declares_contract(f'CONTRACT = "0017 was the last reader"\n{source}')


@pytest.mark.parametrize(
    "step",
    [
        'op.add_column("ticket", sa.Column("n", sa.Integer(), nullable=False, server_default="0"))',
        'op.add_column("ticket", sa.Column("x", sa.Integer(), nullable=True))',
        'op.alter_column("background_task", "team_id", nullable=True)',
        'op.execute("CREATE INDEX ticket_x ON ticket (title)")',
        'op.create_table("t", sa.Column("id", sa.Integer(), primary_key=True, nullable=False))',
    ],
)
def test_expansions_pass(step: str) -> None:
    assert contract_steps(f"def upgrade() -> None:\n    {step}\n") == []
