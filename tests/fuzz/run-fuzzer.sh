#!/bin/sh
# SPDX-License-Identifier: MIT
# Run one libFuzzer harness for a bounded time on a fresh corpus seeded with the
# kernel captures, our own encoder's messages and the corpus scripts/fuzz-long
# keeps (every kept input is replayed first); fail on any crash, leak,
# sanitizer report or consistency abort.
# usage: run-fuzzer.sh FUZZER GEN_SEEDS KIND SECONDS KERNEL_DATA_DIR [KEPT_CORPUS_DIR]
set -eu
fuzzer=$1 gen_seeds=$2 kind=$3 seconds=$4 kernel_dir=$5 kept=${6:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/smcr-fuzz-$kind.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus" "$work/artifacts"
# (the same-host rendezvous has no kernel counterpart: our own seeds only)
for f in "$kernel_dir"/"$kind"-*.bin; do
	[ -e "$f" ] && cp "$f" "$work/corpus/"
done
if [ -n "$kept" ] && [ -d "$kept" ]; then
	find "$kept" -type f -exec cp {} "$work/corpus/" \;
fi
"$gen_seeds" "$kind" "$work/corpus"
echo "fuzz_$kind: $(ls "$work/corpus" | wc -l) seeds, ${seconds}s"

# libFuzzer's default error exit code is 77, which meson would count as "skipped".
rc=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	"$work/corpus" >"$work/log" 2>&1 || rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log")
echo "fuzz_$kind: exit $rc, ${execs:-?} executions"
if [ "$rc" -ne 0 ] || ls "$work/artifacts/"* >/dev/null 2>&1; then
	tail -n 60 "$work/log"
	for a in "$work/artifacts/"*; do
		[ -e "$a" ] && { echo "artifact $a:"; od -A d -t x1 "$a" | head -n 40; }
	done
	exit 1
fi
tail -n 12 "$work/log"
