"""Imports over GraphQL: `startImport(teamId, mode, uploadId)`.

The file itself goes to `POST /teams/{teamId}/imports/uploads` first (multipart, which GraphQL
keeps off for CSRF safety); the mutation starts the import of that upload. The task is an
ordinary `Task`; its rejected rows are at `/tasks/{id}/report`.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.errors import NotFound
from desk.imports import service as imports
from desk.reads import lookups
from schema import problems as e
from schema.context import Context
from schema.problems import attempt
from schema.types import Task


@strawberry.enum(
    description="create: add tickets whose external id is new; upsert: also update existing ones."
)
class ImportMode(Enum):
    CREATE = "create"
    UPSERT = "upsert"


StartImportResult = Annotated[
    Task | e.TaskConflict | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("StartImportResult"),
]


@strawberry.type
class ImportMutation:
    @strawberry.mutation(
        description="Start importing an uploaded CSV into the team (admins; one import per team "
        "at a time — a second gets TaskConflict with the running one). Upload the file first: "
        "POST /teams/{teamId}/imports/uploads (multipart field `file`) returns its uploadId."
    )
    async def start_import(
        self, info: strawberry.Info, team_id: ID, mode: ImportMode, upload_id: ID
    ) -> StartImportResult | None:
        async def run(ctx: Context, user_id: int) -> Task:
            team, upload = lookups.parse_id(team_id), lookups.parse_id(upload_id)
            if team is None or upload is None:
                raise NotFound("Upload not found.")
            row = await imports.start_import(ctx.rt, user_id, team, upload, mode.value)
            return Task.from_model(row, ctx.now(), user_id)

        allowed = (e.TaskConflict, e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]
