# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by the package tests: builds the Debian package with scripts/package,
# unpacks it into this test's own root with dpkg -x (the system is not touched),
# and points the helpers of tests/apps/lib.sh at the packaged smc_run and
# smcr-stat (unpack_package). Sets: deb (the package file), root (where it is
# unpacked), multiarch (its library directory under /usr/lib), packaged_library.
source "$(dirname -- "${BASH_SOURCE[0]}")/../apps/lib.sh"

need dpkg-deb dpkg-shlibdeps meson ninja
[[ -n $PYTHON ]] || skip "python3 is not installed"
# The learned policy would keep short connections on TCP after their first eight;
# these tests make fewer, and must not depend on what ran before.
export SMCR_LEARN=0

# unpack_package: builds the package and unpacks it; from then on every smcr run
# is the package's: its smc_run finds its library by itself (nothing names it),
# and its smcr-stat reads the stats.
unpack_package() {
    local package_work=${SMCR_PACKAGE_WORK:-$work/package}
    local package_script=${SMCR_PACKAGE_SCRIPT:-$apps_dir/../../scripts/package}
    log "building the package (scripts/package $package_work)"
    deb=$("$package_script" "$package_work" 2>"$work/package.log" | tail -n 1) ||
        { cat "$work/package.log" >&2; fail "scripts/package failed"; }
    [[ -f $deb ]] || { cat "$work/package.log" >&2; fail "scripts/package made no package ('$deb')"; }
    log "package: ${deb##*/}, $(stat -c %s "$deb") bytes"

    root=$work/root
    dpkg -x "$deb" "$root" || fail "dpkg -x $deb failed"
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    packaged_library=$root/usr/lib/$multiarch/smcr/libsmcr.so

    unset SMCR_LIB
    SMC_RUN=$root/usr/bin/smc_run
    SMCR_STAT=$root/usr/bin/smcr-stat
    smcr_prefix=("$SMC_RUN" -d)
    if [[ -n ${SMCR_SANITIZER_PRELOAD:-} ]]; then
        smcr_prefix=(env "LD_PRELOAD=$SMCR_SANITIZER_PRELOAD" "$SMC_RUN" -d)
    fi
}

# assert_packaged_library PID WHAT: the live process PID has the packaged
# libsmcr.so mapped (not a build tree's, not one installed on the host).
assert_packaged_library() {
    local pid=$1 what=$2
    grep -qF " $packaged_library" "/proc/$pid/maps" 2>/dev/null ||
        fail "$what (pid $pid) does not have $packaged_library mapped"
}
