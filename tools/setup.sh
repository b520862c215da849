#!/usr/bin/env bash
# Creates the virtual environment (default .venv in the repository root; METATRACE_VENV
# overrides) with the pinned dependencies of requirements.lock and metatrace itself (editable).
# Re-running is cheap: an environment already built from the same lock file is reused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${METATRACE_VENV:-$root/.venv}"
# .venv may be a link to an environment kept elsewhere (CI keeps one per lock file): build there.
if [ -L "$venv" ]; then
  target="$(readlink -f "$venv")"
  mkdir -p "$target"
  venv="$target"
fi
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"metatrace needs Python 3.11, found {sys.version}"'

lock_hash="$(sha256sum "$root/requirements.lock" "$root/pyproject.toml" | sha256sum | cut -c1-16)"
stamp="$venv/.metatrace-lock-$lock_hash"
if [ ! -f "$stamp" ]; then
  echo "setup: building $venv from requirements.lock" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$root/requirements.lock"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e "$root" \
    || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$root"
  rm -f "$venv"/.metatrace-lock-*
  touch "$stamp"
fi
