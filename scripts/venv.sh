# shellcheck shell=bash
# Sourced by scripts/dev and scripts/test: make sure .venv exists and matches uv.lock.
#
# Needs only Python >= 3.11. Uses uv (from PATH, or installed with pip into .taskdesk/tools) to
# create .venv exactly as uv.lock says; if uv cannot be had, falls back to pip and
# requirements.lock (uv.lock exported, dev group included; tests/test_lock.py keeps the two in
# step). PYTHON=/path/to/python picks the interpreter; TASKDESK_INSTALLER=pip forces the fallback.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.taskdesk/tools"

say() { echo "taskdesk: $*" >&2; }

find_python() {
    local c
    for c in "${PYTHON:-}" python3.13 python3.12 python3.11 python3 python; do
        [ -n "$c" ] || continue
        if command -v "$c" >/dev/null 2>&1 &&
            "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$c"
            return 0
        fi
    done
    say "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11 if it has another name)"
    return 1
}

find_uv() {
    if [ "${TASKDESK_INSTALLER:-}" = pip ]; then  # force the fallback (to test it)
        return 1
    fi
    if command -v uv >/dev/null 2>&1; then
        command -v uv
        return 0
    fi
    if [ ! -x "$TOOLS/bin/uv" ]; then
        say "installing uv into .taskdesk/tools (once)"
        "$PY" -m venv "$TOOLS" >&2 && "$TOOLS/bin/pip" install --quiet uv >&2 || return 1
    fi
    echo "$TOOLS/bin/uv"
}

# The fallback: pip into .venv, exactly the locked versions (requirements.lock), then the project
# itself, editable and without resolving anything again.
pip_install() {
    local stamp="$ROOT/.venv/.taskdesk-pip-stamp" want
    want="$(cat "$ROOT/pyproject.toml" "$ROOT/requirements.lock" | cksum)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    say "uv is not available: installing with pip instead (versions from requirements.lock)"
    [ -x "$ROOT/.venv/bin/python" ] || "$PY" -m venv "$ROOT/.venv"
    "$ROOT/.venv/bin/python" -m pip install --quiet --upgrade pip
    "$ROOT/.venv/bin/python" -m pip install --quiet -r "$ROOT/requirements.lock"
    "$ROOT/.venv/bin/python" -m pip install --quiet --no-deps -e "$ROOT"
    echo "$want" >"$stamp"
}

ensure_venv() {
    PY="$(find_python)" || exit 1
    local uv
    if uv="$(find_uv)"; then
        # Fast when nothing changed; picks up dependencies teammates added to uv.lock.
        UV_PYTHON_DOWNLOADS=never "$uv" sync --frozen --quiet --python "$PY" --project "$ROOT" || {
            say "uv sync failed (see above)"
            exit 1
        }
    else
        pip_install || {
            say "could not install the dependencies (see above)"
            exit 1
        }
    fi
    export PATH="$ROOT/.venv/bin:$PATH"
    export VIRTUAL_ENV="$ROOT/.venv"
}
