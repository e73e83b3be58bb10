#!/bin/sh
# SPDX-License-Identifier: MIT
#
# The interposer's two structural rules, checked on the built objects:
#  1. libsmcr.so exports exactly the names in preload.map (the wrapped libc
#     names and smc_preload_*), nothing more and nothing less;
#     and every function the wrapper objects define with default
#     visibility is in the map (a wrapper missing from the map is silently
#     hidden: the program would call libc directly);
#  2. nothing inside calls a wrapped name directly: libsmcr.so has no
#     relocation against one (a PLT/GOT reference would reach our own
#     wrapper or libc behind the fd table's back), and the static
#     libraries (src/common, src/smcr, the preload core) have no undefined
#     reference to one. The only way in is smcr_real, bound by name with
#     dlsym in src/common/real.c.
#     One wrapped name is exempt: syscall.  Its wrapper (wrap_seccomp.c)
#     looks only at SYS_seccomp and passes every other number straight to
#     libc's, touching no fd table, so the library's own raw system calls
#     (made with syscall() precisely to stay out of the other wrappers) may
#     reach it; the library makes no seccomp call of its own.
#  3. libsmcr.so loads where rdma-core is absent: no DT_NEEDED on
#     libibverbs/librdmacm and no undefined ibv_*/rdma_* symbol (the verbs
#     transport binds libibverbs with dlopen, src/smcr/ibv.h).
#
# usage: check-exports.sh LIBSMCR_SO PRELOAD_MAP [--wrappers LIB] STATIC_LIB...
set -eu

so=$1
map=$2
shift 2
wrappers=
if [ "${1:-}" = --wrappers ]; then
	wrappers=$2
	shift 2
fi

fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Names in the map's global section (one "name;" per line, comments aside).
sed -e 's:/\*.*\*/::' "$map" |
	awk '/global:/ { g = 1; next } /local:/ { g = 0 } g && /^[ \t]*[A-Za-z_][A-Za-z0-9_]*;/ {
		gsub(/[ \t;]/, ""); print }' | sort -u >"$tmp/map"
grep -v '^smc_preload_' "$tmp/map" >"$tmp/wrapped"
grep -vx syscall "$tmp/wrapped" >"$tmp/direct"

if [ "$(wc -l <"$tmp/wrapped")" -lt 40 ]; then
	echo "check-exports: could not read the wrapped names from $map" >&2
	exit 1
fi

# 1. Exports.
nm -D --defined-only "$so" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$tmp/exported"
if ! cmp -s "$tmp/map" "$tmp/exported"; then
	echo "check-exports: $so exports differ from $map (< map only, > library only):" >&2
	diff "$tmp/map" "$tmp/exported" | grep '^[<>]' >&2 || true
	fail=1
fi

# 1b. Every default-visibility function of the wrapper objects is exported.
if [ -n "$wrappers" ]; then
	readelf -sW "$wrappers" | awk '$4 == "FUNC" && $5 == "GLOBAL" && $6 == "DEFAULT" &&
		$7 != "UND" { print $8 }' | sort -u >"$tmp/defined"
	if comm -23 "$tmp/defined" "$tmp/map" | grep . >"$tmp/bad"; then
		echo "check-exports: $wrappers defines exported functions missing from $map:" >&2
		sed 's/^/  /' "$tmp/bad" >&2
		fail=1
	fi
	set -- "$wrappers" "$@"
fi

# 2a. No relocation of the library refers to a wrapped name.
readelf -rW "$so" | awk 'NF >= 5 && $1 ~ /^[0-9a-f]+$/ { print $5 }' | sed 's/@.*//' |
	sort -u >"$tmp/relocs"
if comm -12 "$tmp/direct" "$tmp/relocs" | grep . >"$tmp/bad"; then
	echo "check-exports: $so calls wrapped names through the PLT/GOT (use smcr_real):" >&2
	sed 's/^/  /' "$tmp/bad" >&2
	fail=1
fi

# 2b. No static library has an undefined reference to a wrapped name.
for lib in "$@"; do
	nm -u "$lib" 2>/dev/null | awk 'NF == 2 && $1 == "U" { print $2 } NF == 1 { print $1 }' |
		sed 's/@.*//' | sort -u >"$tmp/undef"
	if comm -12 "$tmp/direct" "$tmp/undef" | grep . >"$tmp/bad"; then
		echo "check-exports: $lib calls wrapped libc names directly (use smcr_real):" >&2
		sed 's/^/  /' "$tmp/bad" >&2
		fail=1
	fi
done

# 3. No link-time dependency on rdma-core.
if readelf -dW "$so" | grep -E 'NEEDED.*(libibverbs|librdmacm)' >"$tmp/bad"; then
	echo "check-exports: $so needs rdma-core at load time (bind it in src/smcr/ibv.h):" >&2
	sed 's/^/  /' "$tmp/bad" >&2
	fail=1
fi
if nm -D --undefined-only "$so" | awk '{ print $NF }' | grep -E '^_?(ibv|rdma)_' >"$tmp/bad"; then
	echo "check-exports: $so has undefined rdma-core symbols (add them to SMCR_IBV_SYMBOLS):" >&2
	sed 's/^/  /' "$tmp/bad" >&2
	fail=1
fi

if [ "$fail" -eq 0 ]; then
	echo "check-exports: $(wc -l <"$tmp/exported") exports match the map;" \
		"no direct calls to $(wc -l <"$tmp/wrapped") wrapped names in $# static libraries"
fi
exit "$fail"
