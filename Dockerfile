# The taskdesk image: one image for `taskdesk serve`, `taskdesk worker` and `taskdesk migrate`
# (see compose.yml). Dependencies come from uv.lock, so the image has the tested versions.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    UV_LINK_MODE=copy \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    PATH=/opt/venv/bin:$PATH

RUN pip install --no-cache-dir uv==0.13.9

WORKDIR /app
# Dependencies first: this layer is reused until the lock file changes.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY . .
# Editable on purpose: `taskdesk migrate` reads alembic.ini and migrations/ from /app.
RUN uv sync --frozen --no-dev

RUN useradd --system --uid 10001 --no-create-home taskdesk
USER taskdesk
EXPOSE 8000
CMD ["taskdesk", "serve", "--host", "0.0.0.0", "--port", "8000"]
