#!/usr/bin/env bash
# Makes a Python venv with the current PyPI torch 2.x, for the tests of fastrun's c10d client
# against torch 2.x's TCPStore servers (libuv and legacy; docs/stores.md). Debian ships torch
# 1.13 only (python3-torch, tools/install-deps.sh), which speaks the older wire protocol.
#   tools/install-torch2.sh                 venv at ${FASTRUN_TORCH2_VENV:-/var/cache/fastrun/torch2-venv}
#   FASTRUN_TORCH2_SPEC='torch==2.5.1' ...  another torch than the newest 2.x
# Then point the tests at it: FASTRUN_TORCH2_PYTHON=<venv>/bin/python (or the CMake cache
# variable of the same name). Idempotent; quiet unless it fails; prints how long it took. The
# wheels (~3 GB: PyPI's torch is the CUDA build, which runs on CPU) are cached under
# /var/cache/fastrun/pip, so a second venv or a re-run after a removal takes seconds, not minutes.
set -euo pipefail
venv=${FASTRUN_TORCH2_VENV:-/var/cache/fastrun/torch2-venv}
spec=${FASTRUN_TORCH2_SPEC:-torch>=2,<3}
cache=/var/cache/fastrun/pip
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() {
  echo "install-torch2: $1 (log follows)" >&2
  cat "$log" >&2
  exit 1
}

# 1. Debian's python3 cannot make a venv without python3-venv (ensurepip is split out).
if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q "install ok installed"; then
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv; } >"$log" 2>&1 ||
    fail "apt-get install python3-venv failed"
fi

# 2. Done already when the venv has a torch 2.x installed: pip writes the package's metadata
#    last, so a download cut short leaves none. Read without importing torch (which takes
#    seconds).
if version=$("$venv/bin/python" -c 'import sys, importlib.metadata as m; v = m.version("torch"); print(v); sys.exit(int(v.split(".")[0]) != 2)' 2>/dev/null); then
  echo "install-torch2: torch $version already in $venv ($(($(date +%s) - start)) s); FASTRUN_TORCH2_PYTHON=$venv/bin/python"
  exit 0
fi

# 3. The venv, from Debian's interpreter (not a python3 earlier on PATH such as pyenv's), then torch.
mkdir -p "$cache" "$(dirname "$venv")"
[[ -x $venv/bin/python ]] || /usr/bin/python3 -m venv "$venv" >"$log" 2>&1 || fail "python3 -m venv $venv failed"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --cache-dir "$cache" "$spec" >"$log" 2>&1 ||
  fail "pip install $spec into $venv failed"
version=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>>"$log") || fail "torch does not import in $venv"
echo "install-torch2: torch $version in $venv ($(($(date +%s) - start)) s); FASTRUN_TORCH2_PYTHON=$venv/bin/python"
