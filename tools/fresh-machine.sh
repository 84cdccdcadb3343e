#!/usr/bin/env bash
# The README's two commands on a fresh Debian 12: a minbase bookworm chroot
# (debootstrap), a clean clone of this repository's HEAD inside it, then
# tools/check.sh and tools/demo.sh exactly as a new user runs them, as root.
# Catches a package the build or a test needs that install-deps.sh does not
# name (a green run on a developer machine hides those).
#
# Not part of ctest: it needs root, mounts and about 35 minutes (PyTorch's
# anchors environments, tools/install-anchors.sh, add a few of them).
#
# usage: tools/fresh-machine.sh [--dir DIR] [--keep] [--mirror URL] [--demo-first]
#   --demo-first  run tools/demo.sh first, on the cold chroot (empty caches, no
#                 packages): what a new user's first command costs; then
#                 tools/check.sh. Default: check.sh first, then the demo
#   --demo-only   the demo on the cold chroot and nothing else
#   --dir DIR     where the chroot goes (default: a new /var/tmp/hc-fresh.XXXX)
#   --keep        leave the chroot on disk afterwards (default: removed)
#   --mirror URL  Debian mirror (default http://deb.debian.org/debian)
# The shared data folder (../shared beside this repository) is bind-mounted
# read-only at the same place relative to the clone, as CI has it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="" keep=0 mirror="http://deb.debian.org/debian" demo_first=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --mirror) mirror="$2"; shift 2 ;;
    --demo-first) demo_first=1; shift ;;
    --demo-only) demo_first=2; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "fresh-machine: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-machine: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi
if [ -z "$dir" ]; then
  dir="$(mktemp -d /var/tmp/hc-fresh.XXXXXX)"
  # The chroot's / as a machine's: mktemp's 0700 keeps every user but root
  # out (munge's postinst runs mungekey as the munge user: "su: failed to
  # execute /bin/sh: Permission denied").
  chmod 0755 "$dir"
elif [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
  echo "fresh-machine: --dir $dir exists and is not empty" >&2
  exit 2
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

if ! command -v debootstrap >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -l "${mounts[$i]}" 2>/dev/null || true
  done
  if [ "$keep" -eq 0 ]; then
    rm -rf --one-file-system "$dir"
  else
    echo "fresh-machine: chroot kept in $dir"
  fi
}
trap cleanup EXIT

cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "fresh-machine: $(date -u +%FT%TZ), CPU: $cpu, $(nproc) cores; chroot $dir"
t0=$(date +%s)
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 || {
  echo "fresh-machine: debootstrap failed, log in $dir.debootstrap.log" >&2
  exit 1
}
rm -f "$dir.debootstrap.log"
t1=$(date +%s)
echo "fresh-machine: debootstrap minbase bookworm: $((t1 - t0)) s"

cp /etc/resolv.conf "$dir/etc/resolv.conf"
# A fresh machine of this kind comes with its registries' settings: pip's
# configuration and the local CA certificates it trusts (an egress proxy's),
# which tools/install-anchors.sh's PyPI downloads need.
if [ -f /etc/pip.conf ]; then
  cp /etc/pip.conf "$dir/etc/pip.conf"
fi
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$dir/usr/local/share/ca-certificates" "$dir/etc/ssl/certs"
  cp -r /usr/local/share/ca-certificates/. "$dir/usr/local/share/ca-certificates/"
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
fi
# The chroot's / a mount point of its own, as a machine's root is: ip netns
# (the cluster test bed) makes / a slave mount and fails on a plain folder.
mount --bind "$dir" "$dir"
mounts+=("$dir")
for m in proc sys dev dev/pts dev/shm; do
  mkdir -p "$dir/$m"
  mount --bind "/$m" "$dir/$m"
  mounts+=("$dir/$m")
done

# A clean clone of HEAD (what CI sees), and ../shared beside it, read-only.
work="$dir/work"
mkdir -p "$work"
git clone --quiet --no-local "$root" "$work/hc"
echo "fresh-machine: cloned $(git -C "$root" rev-parse --short HEAD) into /work/hc"
if [ -d "$root/../shared" ]; then
  mkdir -p "$work/shared"
  mount --bind "$root/../shared" "$work/shared"
  mounts+=("$work/shared")
  mount -o remount,bind,ro "$work/shared"
fi

run_in_chroot() {
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /work/hc && $1"
}

status=0
order=(tools/check.sh tools/demo.sh)
if [ "$demo_first" -eq 1 ]; then
  order=(tools/demo.sh tools/check.sh)
elif [ "$demo_first" -eq 2 ]; then
  order=(tools/demo.sh)
fi
for step in "${order[@]}"; do
  t2=$(date +%s)
  run_in_chroot "$step" || status=$?
  echo "fresh-machine: $step: exit $status, $(( $(date +%s) - t2 )) s"
  if [ "$status" -ne 0 ] && [ -f "$dir/var/log/apt/term.log" ]; then
    # install-deps.sh keeps apt quiet; a failed package says why here.
    echo "fresh-machine: the chroot's apt log around dpkg's errors, and its end:"
    grep -n -B 25 -A 3 "dpkg: error processing" "$dir/var/log/apt/term.log" | head -n 120 || true
    tail -n 12 "$dir/var/log/apt/term.log"
  fi
  [ "$status" -eq 0 ] || break
done
echo "fresh-machine: $([ "$status" -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - t0 )) s"
exit "$status"
