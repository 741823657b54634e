# Sourced by scripts/test and scripts/mementograph: a project venv with everything installed, on any machine.
# Re-installs only when pyproject.toml changed. Python >= 3.11 is the one requirement.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MEMENTOGRAPH_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

# Python is checked only when the venv is made: an existing venv's own python is what runs (and a pyenv shim
# costs ~0.2 s a call, which every command would pay).
if [ ! -x "$VENV/bin/python" ]; then
  if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "mementograph: $PYTHON not found; install Python 3.11 or newer (or set PYTHON=/path/to/python3.11)" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "mementograph: needs Python >= 3.11, $PYTHON is $("$PYTHON" -V 2>&1); set PYTHON=/path/to/python3.11" >&2
    exit 1
  fi
  echo "mementograph: creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.mementograph-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "mementograph: installing dependencies into $VENV (first run only)" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[${MEMENTOGRAPH_EXTRAS:-test}]" >&2
  echo "$want" > "$stamp"
fi
# tiktoken downloads its BPE files on first use; offline, the shared copy beside the repo serves.
if [ -z "${TIKTOKEN_CACHE_DIR:-}" ] && [ -d "$ROOT/../shared/data/tiktoken/cache" ]; then
  export TIKTOKEN_CACHE_DIR="$(cd "$ROOT/../shared/data/tiktoken/cache" && pwd)"
fi
