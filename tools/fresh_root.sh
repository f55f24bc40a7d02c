#!/usr/bin/env bash
# The README's set-up on a fresh Debian 12 machine, as a new user meets it. CI's first stage
# (.ci/run), and runnable by hand before submitting (as root):
#   tools/fresh_root.sh [COMMIT]        COMMIT defaults to HEAD; uncommitted changes are not seen
# A machine that has been used for development has packages installed by hand, so a missing
# install step never shows there; a fresh root has nothing but what the README's commands install.
#   1. A minimal bookworm root (mmdebstrap --variant=minbase, plus ca-certificates and git) from
#      this machine's own apt sources, made once and cached as a tarball in FASTRUN_FRESH_CACHE
#      (default /var/cache/fastrun; remade after 30 days); every run unpacks a new root from it.
#   2. In it: clone COMMIT and run the README's first command (bash tools/demo.sh), timed from the
#      clone to the demo's last line.
#   3. What docs/installing.md promises: the blocks it marks <!-- fresh-root: build-machine -->
#      run in that root (install the prefix), then the prefix and the consumer's sources are
#      copied into a second new root, which runs the blocks marked
#      <!-- fresh-root: consumer-machine --> in order: the packages the page lists, and the
#      documented find_package and pkg-config consumers.
#   4. The README's second command (bash tools/test.sh) in the first root. FASTRUN_TEST_STAGES
#      and FASTRUN_TEST_BUILD_ONLY pass through; FASTRUN_FRESH_TESTS=0 leaves this step out.
# FASTRUN_FRESH_SETUP=0 leaves steps 2 and 3 out (the root only gets the clone): with
# FASTRUN_TEST_BUILD_ONLY=1 that fills step 4's compiler cache and nothing else, for a machine
# whose cache is empty (CI must fit its time limit; a cold cache compiles four builds).
# Each root is a chroot in a private mount namespace: the root bound onto itself (so that `/` is
# a mount point, as `ip netns` needs), proc, sys, dev, a tmpfs of its own on /dev/shm, and this
# machine's /etc/hosts, resolv.conf and certificate authorities; without those, tests fail for
# the chroot's reasons. A
# step that fails ends the run with its last lines; nothing of the roots is left behind.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $(id -u) == 0 ]] || { echo "fresh_root: needs root (chroot, mount namespaces)" >&2; exit 2; }
commit=$(git rev-parse --verify "${1:-HEAD}^{commit}") || {
  echo "fresh_root: '${1:-HEAD}' is not a commit of this repository" >&2; exit 2; }
git_dir=$(cd "$(git rev-parse --git-common-dir)" && pwd)
cache=${FASTRUN_FRESH_CACHE:-/var/cache/fastrun}
tarball=$cache/bookworm-minbase.tar
start=$SECONDS

say() { echo "fresh_root: $*"; }

# --- 1. the cached minimal root -------------------------------------------------------------
if ! command -v mmdebstrap >/dev/null; then
  say "installing mmdebstrap (this script's own tool, not the project's)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi
if [[ ! -f $tarball || ! -s $tarball ]] || [[ -n $(find "$tarball" -mtime +30) ]]; then
  mkdir -p "$cache"
  rm -rf "$tarball" "$tarball.part"  # a stale one, or a folder an older version of this step made
  # The roots use this machine's apt sources (its mirror), pasted into the root's own.
  sources=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && grep -q '^[^#[:space:]]' "$f" && sources+=("$f")
  done
  ((${#sources[@]})) || { echo "fresh_root: no apt sources in /etc/apt" >&2; exit 1; }
  say "making $tarball (once; about a minute)"
  t=$SECONDS
  # --format: mmdebstrap picks the format from the name's extension, and ".part" has none it
  # knows (it then makes a folder of that name).
  mmdebstrap --quiet --format=tar --variant=minbase --include=ca-certificates,git bookworm "$tarball.part" \
    "${sources[@]}"
  mv "$tarball.part" "$tarball"
  say "root tarball made in $((SECONDS - t)) s"
fi

work=$(mktemp -d /var/tmp/fastrun-fresh-root.XXXXXX)
# Processes still running in a root (a daemon a test started and did not stop) keep its mount
# namespace alive: stop them, then remove the roots (mounts live only in the private namespace,
# so the folders are plain here; --one-file-system guards against a mistake).
cleanup() {
  local pid left=""
  for _ in 1 2 3; do
    left=""
    for pid in /proc/[0-9]*; do
      [[ $(readlink "$pid/root" 2>/dev/null) == "$work"/* ]] && left+=" ${pid#/proc/}"
    done
    [[ -z $left ]] && break
    kill -KILL $left 2>/dev/null || true
    sleep 1
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

new_root() {  # new_root NAME: unpacks a fresh root at $work/NAME
  mkdir "$work/$1"
  tar -xf "$tarball" -C "$work/$1"
  cp /etc/hosts /etc/resolv.conf "$work/$1/etc/"
  # This machine's trust anchors and pip settings: a network that reaches PyPI through a proxy
  # with its own certificate authority needs them in the root too (tools/install-torch2.sh).
  cp /etc/ssl/certs/ca-certificates.crt "$work/$1/etc/ssl/certs/"
  if compgen -G '/usr/local/share/ca-certificates/*' >/dev/null; then
    cp -r /usr/local/share/ca-certificates/. "$work/$1/usr/local/share/ca-certificates/"
  fi
  [[ ! -f /etc/pip.conf ]] || cp /etc/pip.conf "$work/$1/etc/"
  mkdir -p "$work/$1/mnt/fastrun.git" "$work/$1/var/cache/fastrun/pip" "$cache/pip"
}

# in_root LIMIT_S NAME SCRIPT: runs SCRIPT under bash in root NAME as a login would (a clean
# environment), for LIMIT_S seconds at most (what is left of it is killed by cleanup), with this repository's git directory read-only at /mnt/fastrun.git, and this machine's pip
# wheel cache at /var/cache/fastrun/pip (tools/install-torch2.sh: torch 2.x's ~3 GB of wheels
# are downloaded once, not on every run; the venv itself is made anew in the root).
# Extra binds for the steps that follow, "SOURCE:MODE" (ro or rw) at the same path in the root
# (machine_binds, below).
binds=()
in_root() {
  local limit=$1 root=$work/$2 script=$3 pass=()
  for v in http_proxy https_proxy no_proxy PIP_CERT SSL_CERT_FILE REQUESTS_CA_BUNDLE PIP_DEFAULT_TIMEOUT \
           FASTRUN_TEST_STAGES FASTRUN_TEST_BUILD_ONLY FASTRUN_TORCH2 CI; do
    [[ -n ${!v:-} ]] && pass+=("$v=${!v}")
  done
  ((${#binds[@]} == 0)) || pass+=("CCACHE_DIR=$cache/ccache")
  timeout --kill-after=10 "$limit" unshare --mount --propagation private -- bash -euo pipefail -c '
    root=$1 git_dir=$2 cache=$3 extra=$4; shift 4
    mount --bind "$root" "$root"
    mount --bind -o ro "$git_dir" "$root/mnt/fastrun.git"
    mount --bind "$cache/pip" "$root/var/cache/fastrun/pip"
    for b in $extra; do
      mkdir -p "$root${b%:*}"
      mount --bind "${b%:*}" "$root${b%:*}"
      [[ ${b##*:} == rw ]] || mount -o remount,bind,ro "$root${b%:*}"
    done
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
    exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"' \
    in_root "$root" "$git_dir" "$cache" "${binds[*]}" "${pass[@]}" bash -euo pipefail -c "cd /root; $script"
}

# step WHAT LIMIT_S NAME SCRIPT: in_root, its output streamed and kept; on failure, the step's
# last lines again and the run ends.
step() {
  local what=$1 limit=$2 root=$3 script=$4 rc=0 log="$work/$(echo "$1" | tr -c 'a-z0-9\n' '-').log"
  say "== $what"
  in_root "$limit" "$root" "$script" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  if ((rc != 0)); then
    ((rc == 124)) && say "$what: did not finish within $limit s"
    say "$what FAILED (exit $rc); its last lines:"
    tail -n 40 "$log" | sed 's/^/  | /'
    exit 1
  fi
}

# The marked ```sh blocks of docs/installing.md, in order, as one script (from the commit).
doc_blocks() {  # doc_blocks ROLE
  git show "$commit:docs/installing.md" | awk -v want="<!-- fresh-root: $1 -->" '
    $0 == want { armed = 1; next }
    armed && /^```/ && !inside { inside = 1; next }
    inside && /^```/ { inside = 0; armed = 0; print ""; next }
    inside { print }'
}

# --- 2. the README's first command ----------------------------------------------------------
new_root build-machine
say "commit $(git log -1 --format='%h %s' "$commit")"
t=$SECONDS
setup_s="left out"
if [[ ${FASTRUN_FRESH_SETUP:-1} == 0 ]]; then
  step "the clone (FASTRUN_FRESH_SETUP=0: no main job, no install)" 300 build-machine "
  git clone -q --no-local --no-checkout /mnt/fastrun.git fastrun
  cd fastrun && git checkout -q $commit"
else
step "README: bash tools/demo.sh" 1200 build-machine "
  git clone -q --no-local --no-checkout /mnt/fastrun.git fastrun
  cd fastrun && git checkout -q $commit
  bash tools/demo.sh"
setup_s="$((SECONDS - t)) s"
say "the README's first command on a fresh Debian 12 root: $setup_s from the clone to the demo's last line"

# --- 3. docs/installing.md: install a prefix, build against it elsewhere ----------------------
build_blocks=$(doc_blocks build-machine)
consumer_blocks=$(doc_blocks consumer-machine)
[[ -n $build_blocks && -n $consumer_blocks ]] || {
  echo "fresh_root: docs/installing.md marks no <!-- fresh-root: build-machine --> or consumer-machine block" >&2; exit 1; }
step "docs/installing.md: install the prefix" 300 build-machine "cd fastrun
$build_blocks"
new_root consumer-machine
# The prefix (wherever the page installed it: the consumer blocks name the same path) and the
# consumer's sources; nothing else of the build machine.
prefix=$(grep -o -- '--prefix [^ ]*' <<<"$build_blocks" | head -1 | cut -d' ' -f2)
[[ -n $prefix ]] || { echo "fresh_root: the build-machine block of docs/installing.md installs no --prefix" >&2; exit 1; }
mkdir -p "$work/consumer-machine$(dirname "$prefix")" "$work/consumer-machine/root/fastrun/tests/install"
cp -a "$work/build-machine$prefix" "$work/consumer-machine$prefix"
cp -a "$work/build-machine/root/fastrun/tests/install/consumer" "$work/consumer-machine/root/fastrun/tests/install/"
t=$SECONDS
step "docs/installing.md: a consumer machine with only the packages the page lists" 600 consumer-machine "cd fastrun
$consumer_blocks"
say "the consumer machine: $((SECONDS - t)) s from its packages to the consumers' last line"
fi

# --- 4. the README's second command ---------------------------------------------------------
if [[ ${FASTRUN_FRESH_TESTS:-1} != 0 ]]; then
  # What this machine has beside Debian, for the tests only (the README's first command and the
  # consumer machine above ran without them):
  # - its CUDA toolkit, read-only, where CMake looks for it (/usr/local/cuda): the main stage
  #   then compiles the nccl component, and the torch2 stage can configure against the CUDA
  #   wheel's LibTorch (its CMake package needs a toolkit);
  # - a compiler cache kept between runs ($cache/ccache, CCACHE_DIR in the root): the four builds
  #   of tools/test.sh compile only what changed since the last run on this machine.
  mkdir -p "$cache/ccache"
  binds=("$cache/ccache:rw")
  if [[ -d /usr/local/cuda/ ]]; then
    cuda=$(readlink -f /usr/local/cuda)
    binds+=("$cuda:ro")
    [[ $cuda == /usr/local/cuda ]] || ln -sfn "$cuda" "$work/build-machine/usr/local/cuda"
  fi
  t=$SECONDS
  step "README: bash tools/test.sh" 4200 build-machine "cd fastrun && bash tools/test.sh"
  say "the README's second command: $((SECONDS - t)) s"
fi
say "passed in $((SECONDS - start)) s (the README's first command: $setup_s)"
