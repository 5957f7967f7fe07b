#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The PyTorch bridge's test suite (`meson test --suite torch`) against the PyTorch of the
# *other* Debian release: on a Debian 12 host (PyTorch 1.13) it runs in a Debian 13 root
# (PyTorch 2.6), on a Debian 13 host in a Debian 12 root, so that the host's own test run plus
# this script prove both versions. README command 2 calls it; .ci/run counts its
# BUILD_DIR/meson-logs/testlog.json.
#
#   tests/torch-other-debian.sh BUILD_DIR [RELEASE]
#
# BUILD_DIR: a build directory inside the checkout (relative; made anew: an earlier one was
# built in another root). RELEASE: bookworm or trixie, by default the one the host is not.
# Needs root, debootstrap, the Debian mirror the host's apt uses (about 400 MB to fetch) and
# about 2.5 GB of memory: the root is made from scratch with debootstrap on a tmpfs mounted
# on a temporary directory (under $TMPDIR, default /var/tmp; no disk writes to wait for while
# dpkg unpacks, nothing to delete after), the checkout is bind-mounted into it, and on exit,
# also after a failure or an interrupt, everything is unmounted and the directory removed
# (DTR_KEEP_ROOT=1 leaves the root's tmpfs mounted for a look). Phases and their times are
# printed; the tools' own output goes to BUILD_DIR/{debootstrap,apt,setup}.log and is shown
# when they fail.
set -euo pipefail

# What the torch suite needs inside the root, and no more (python3-dev comes with libtorch-dev;
# python3-venv and python3-setuptools for the test that installs the bridge with pip).
packages=(g++ meson ninja-build pkg-config libboost-dev python3-torch python3-torchvision libtorch-dev pybind11-dev
          python3-venv python3-setuptools)

die() { echo "torch-other-debian: $*" >&2; exit 2; }

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: $0 BUILD_DIR [bookworm|trixie]"
build=$1
case "$build" in
    /* | . | ./ | .. | ../* | */../* | */.. | '') die "BUILD_DIR must be a directory inside the checkout, relative to it, got '$build'" ;;
esac
checkout=$(cd "$(dirname "$0")/.." && pwd)
cd "$checkout"

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mount, chroot)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (Debian: apt-get install debootstrap)"

host=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
release=${2:-}
if [ -z "$release" ]; then
    case "$host" in
        bookworm) release=trixie ;;
        trixie) release=bookworm ;;
        *) die "the host is '${host:-unknown}', neither Debian 12 (bookworm) nor 13 (trixie): name the release to test in, e.g. $0 $build trixie" ;;
    esac
fi
case "$release" in
    bookworm | trixie) ;;
    *) die "RELEASE must be bookworm or trixie, got '$release'" ;;
esac

# The host's own Debian mirror (its apt sources), else debootstrap's default.
mirror=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT) $(IDENTIFIER)' 2>/dev/null |
    awk -v r="$host" '$2 == r && $3 == "main" && $4 == "Packages" { print $1; exit }' || true)

if [ -e "$build" ]; then
    [ -f "$build/meson-private/coredata.dat" ] || [ -z "$(ls -A "$build")" ] ||
        die "$build exists and is not a meson build directory: not removing it"
    rm -rf "$build"
fi
mkdir -p "$build"
build_abs=$checkout/$build

root=$(mktemp -d "${TMPDIR:-/var/tmp}/dtr-$release-root.XXXXXX")
start=$SECONDS
phase() { printf '[torch-other-debian %4ds] %s\n' "$((SECONDS - start))" "$*"; }

# Mount points below the root (not the root's own tmpfs).
mounted_under_root() { awk -v r="$root/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo; }
root_mounted() { awk -v r="$root" '$5 == r { found = 1 } END { exit !found }' /proc/self/mountinfo; }

cleanup() {
    local status=$? pid m
    set +e
    # processes left inside the root (a hung test's workers): this script started them
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] && kill -9 "$pid" 2>/dev/null
    done
    # deepest first, re-read after each: a host may have mounts stacked on one point
    # (/dev/pts twice), which one umount -R takes together
    while m=$(mounted_under_root | sort -r | head -n 1) && [ -n "$m" ]; do
        umount -R "$m" 2>/dev/null || umount -R -l "$m" || break
    done
    if [ -n "$(mounted_under_root)" ]; then
        echo "torch-other-debian: still mounted under $root, not removing it:" >&2
        mounted_under_root >&2
        [ "$status" = 0 ] && status=1
    elif [ "${DTR_KEEP_ROOT:-0}" = 1 ] && root_mounted; then
        phase "kept the root: $root (a tmpfs: umount $root && rmdir $root)"
    else
        if root_mounted; then umount "$root" || umount -l "$root"; fi
        root_mounted || rmdir "$root"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mount -t tmpfs -o mode=755 tmpfs "$root"

show_log() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2; }

phase "debootstrap --variant=minbase $release $root ${mirror:-"(the default mirror)"}"
debootstrap --variant=minbase "$release" "$root" ${mirror:+"$mirror"} >"$build_abs/debootstrap.log" 2>&1 ||
    { show_log "$build_abs/debootstrap.log"; die "debootstrap failed"; }

mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev" # nothing mounted or unmounted below it reaches the host's /dev
mkdir -p "$root/src"
mount --bind "$checkout" "$root/src"
cp /etc/hosts "$root/etc/hosts" # gloo resolves the host name

# A clean environment inside (the host's PYTHONPATH, pyenv, ... mean nothing there); the
# OpenBLAS settings of this machine's processors are kept.
in_root() {
    local keep=()
    local v
    for v in $(compgen -e | grep -E '^OPENBLAS_'); do keep+=("$v=${!v}"); done
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "${keep[@]}" chroot "$root" "$@"
}

phase "apt-get install --no-install-recommends ${packages[*]}"
{ in_root apt-get update && in_root apt-get install -y --no-install-recommends "${packages[@]}"; } \
    >"$build_abs/apt.log" 2>&1 || { show_log "$build_abs/apt.log"; die "apt-get in the $release root failed"; }
torch_version=$(in_root python3 -c 'import torch; print(torch.__version__)' || true)
compiler=$(in_root g++ --version | head -n 1 || true)
phase "PyTorch $torch_version, $compiler"

phase "meson setup $build -Dtorch=enabled (in the $release root)"
in_root sh -c "cd /src && meson setup '$build' -Dtorch=enabled -Dbenchmarks=disabled -Dcuda=disabled" >"$build_abs/setup.log" 2>&1 ||
    { show_log "$build_abs/setup.log"; die "meson setup in the $release root failed"; }

phase "meson test --suite torch (in the $release root)"
status=0
in_root sh -c "cd /src && meson test -C '$build' --suite torch --print-errorlogs" || status=$?
phase "done: meson test exited with $status"
exit "$status"
