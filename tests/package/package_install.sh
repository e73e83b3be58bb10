#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The Debian package from scripts/package: its control fields and files (smc_run,
# the library in a private directory, smcr-stat, smcr-bpf when built, the man
# pages); dpkg installs and purges it in a root of its own; then, unpacked into a
# throwaway root, a python echo server and two
# clients under the packaged smc_run: the echo's sha256 equals the file's, each
# process maps the packaged library, both logs say smc-shm and the packaged
# smcr-stat counts the server's SMC handshakes.
source "$(dirname -- "${BASH_SOURCE[0]}")/package_lib.sh"
unpack_package

field() { dpkg-deb -f "$deb" "$1"; }

source_version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$apps_dir/../../meson.build" | head -n 1)
[[ $(field Package) == smcr ]] || fail "Package: '$(field Package)', expected smcr"
[[ $(field Version) == "$source_version" ]] ||
    fail "Version: '$(field Version)', meson.build says '$source_version'"
[[ $(field Architecture) == "$(dpkg --print-architecture)" ]] ||
    fail "Architecture: '$(field Architecture)'"
[[ $(field Depends) == *libc6* ]] || fail "Depends: '$(field Depends)' lacks libc6 (dpkg-shlibdeps)"
[[ $(field Recommends) == *libibverbs1* ]] || fail "Recommends: '$(field Recommends)' lacks libibverbs1"
log "control: $(field Package) $(field Version) $(field Architecture); Depends: $(field Depends)"

expected=(
    usr/bin/smc_run
    usr/bin/smcr-stat
    "usr/lib/$multiarch/smcr/libsmcr.so"
    usr/share/man/man7/smcr.7.gz
    usr/share/man/man8/smc_run.8.gz
    usr/share/man/man8/smcr-stat.8.gz
    usr/share/doc/smcr/copyright
    usr/share/doc/smcr/examples/systemd/smcr.conf
)
if [[ ${SMCR_EXPECT_BPF_TOOL:-0} == 1 ]]; then
    expected+=(usr/bin/smcr-bpf usr/share/man/man8/smcr-bpf.8.gz
        "usr/lib/$multiarch/smcr/smcr_sockops.bpf.o")
fi
for f in "${expected[@]}"; do
    [[ -f $root/$f ]] || fail "the package lacks /$f"
done
for f in "$root"/usr/share/man/man*/*.gz; do
    gzip -t "$f" || fail "${f#"$root"} is not a valid gzip file"
done
# The library only in its private directory: nothing preloads it by accident.
others=$(find "$root" -name 'libsmcr*' ! -path "*/usr/lib/$multiarch/smcr/*")
[[ -z $others ]] || fail "libsmcr outside /usr/lib/$multiarch/smcr: $others"
log "files: ${#expected[@]} expected ones present, library only in /usr/lib/$multiarch/smcr"

# The packaged smc_run, run by path and through PATH, finds the packaged library.
for how in path PATH; do
    if [[ $how == path ]]; then
        out=$("$SMC_RUN" -v) || fail "smc_run -v exited $?"
    else
        out=$(PATH=$root/usr/bin:$PATH smc_run -v) || fail "smc_run -v (through PATH) exited $?"
    fi
    [[ $out == *"library: $packaged_library"* ]] ||
        fail "packaged smc_run -v ($how) does not name $packaged_library: $out"
    [[ $out == *"$source_version"* ]] || fail "packaged smc_run -v ($how) does not say $source_version: $out"
done
log "packaged smc_run uses $packaged_library"

# dpkg itself installs and purges it in a root of its own (its database there, its log
# in $work): the package's files are all dpkg's to remove. Dependencies are the real
# system's business, not this empty root's.
dpkg_root=$work/dpkg-root
mkdir -p "$dpkg_root/var/lib/dpkg/info" "$dpkg_root/var/lib/dpkg/updates"
: >"$dpkg_root/var/lib/dpkg/status"
dpkg_in_root() { dpkg --root="$dpkg_root" --log="$work/dpkg.log" --force-not-root "$@"; }
dpkg_in_root --force-depends -i "$deb" >"$work/dpkg-install.log" 2>&1 ||
    { cat "$work/dpkg-install.log" >&2; fail "dpkg --root -i failed"; }
[[ $(dpkg_in_root -s smcr | sed -n 's/^Status: //p') == "install ok installed" ]] ||
    fail "dpkg --root -s smcr: not installed"
out=$("$dpkg_root/usr/bin/smc_run" -v) || fail "smc_run -v from the dpkg root exited $?"
[[ $out == *"library: $dpkg_root/usr/lib/$multiarch/smcr/libsmcr.so"* ]] ||
    fail "smc_run from the dpkg root does not use its library: $out"
dpkg_in_root -P smcr >"$work/dpkg-purge.log" 2>&1 ||
    { cat "$work/dpkg-purge.log" >&2; fail "dpkg --root -P failed"; }
left=$(cd "$dpkg_root" && find . -mindepth 1 ! -path ./var ! -path ./var/lib ! -path './var/lib/dpkg*')
[[ -z $left ]] || fail "dpkg -P left files behind: $left"
log "dpkg --root: installed ($(dpkg-deb -c "$deb" | wc -l) entries), smc_run found its library, purged without a trace"

random_file "$work/data" $((16 * 1024 * 1024 + 77))
port=$(free_port 4)
echo_stream_server echo-server "$port"
pid=$server_pid
assert_packaged_library "$pid" "echo server"
for i in 1 2; do
    echo_stream_client "echo-client$i" "$port" "$work/data"
    grep -qF "smcr: active in " "$work/echo-client$i.smcr.err" || fail "client $i: the library was not loaded"
    assert_smc_log "echo-client$i" 1
done
log "two echoes of $(stat -c %s "$work/data") bytes, sha256 equal to the file's"
assert_smc_stats "echo server (packaged smcr-stat)" 2 "$pid"
assert_smc_log echo-server 2
