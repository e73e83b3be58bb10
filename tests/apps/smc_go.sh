#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Go programs under smc_run (go_net.go, built with cgo as Debian's Go builds
# by default: dynamically linked, so the library is loaded). Go's net package
# makes its socket calls as system calls of its own, not through libc: smcr
# cannot see them, and every connection with a Go end must behave exactly as
# TCP, without a CLC byte reaching either program and without a wait:
#  - a Go echo server, a python client under smc_run: no smcr listener is
#    registered on the port, so the client proposes nothing (PEERNOSMC);
#  - a python echo server under smc_run, a Go client: no Proposal comes, the
#    server's stats count the connection as TCP (PEERNOSMC);
#  - a server that writes first (socat printing a banner) under smc_run, a Go
#    client waiting for the banner: the server does not wait for a Proposal;
# and the Go programs' own logs (and smc_run --check) say why their
# connections stay TCP. The same
# python server still gives a python client SMC.
source "$(dirname -- "${BASH_SOURCE[0]}")/smc_lib.sh"
need go socat

export GOCACHE=$work/go-cache GOPATH=$work/go-path CGO_ENABLED=1 GOFLAGS=
go build -o "$work/go_net" "$apps_dir/go_net.go" || fail "go build failed"
random_file "$work/data" $((8 * 1024 * 1024 + 5))
size=$(stat -c %s "$work/data")
want="$size $(sha "$work/data")"
go_says='in a Go program: its net package makes socket system calls itself'

# go_said NAME: NAME's log says why the Go program's connections stay TCP.
go_said() {
    grep -q -- "$go_says" "$work/$1.smcr.err" ||
        fail "$1: the log does not say why the Go program's connections stay TCP: $(head -n 3 "$work/$1.smcr.err")"
}

# smc_run --check says the same before anything runs, and of a Go program only.
check_go=$("$SMC_RUN" --check "$work/go_net") || fail "smc_run --check go_net exited $?: $check_go"
grep -q 'a Go program: its net package makes socket system calls itself' <<<"$check_go" ||
    fail "smc_run --check does not say go_net is a Go program: $check_go"
check=$("$SMC_RUN" --check socat) || fail "smc_run --check socat exited $?"
! grep -q 'Go' <<<"$check" || fail "smc_run --check takes socat for a Go program: $check"
log "smc_run --check: $(grep "^verdict" <<<"$check_go")"

# A Go server, an smcr client.
port=$(free_port 4)
start_server smcr go-server "$work/go_net" echo-server "127.0.0.1:$port"
go_pid=$server_pid
wait_listen "$go_pid" "$port"
run_client smcr py-client 30 "$PYTHON" "$apps_dir/echo_stream.py" client "$port" "$work/data"
[[ $exit_code -eq 0 ]] || fail "the python client exited $exit_code"
[[ $(cat "$work/py-client.smcr.out") == "$want" ]] || fail "the echo from the Go server differs"
assert_fallback_log py-client PEERNOSMC 1
go_said go-server
read -r smc fallbacks _ <<<"$(mode_stats "$go_pid")"
[[ $smc -eq 0 && $fallbacks -eq 0 ]] || fail "the Go server's stats count $smc SMC, $fallbacks fallback(s): it saw a connection"
stop_server "$go_pid"
log "Go server: 8 MiB echoed over TCP; the python client proposed nothing (PEERNOSMC)"

# An smcr server, a Go client.
py_port=$(free_port 4)
echo_stream_server py-server "$py_port"
py_pid=$server_pid
run_client smcr go-client 30 "$work/go_net" echo-client "127.0.0.1:$py_port" "$work/data"
[[ $exit_code -eq 0 ]] || fail "the Go client exited $exit_code: $(tail -n 3 "$work/go-client.smcr.err")"
[[ $(cat "$work/go-client.smcr.out") == "$want" ]] || fail "the echo to the Go client differs"
go_said go-client
assert_fallback_stats "python server, Go client" PEERNOSMC 1 "$py_pid"
log "Go client: 8 MiB echoed over TCP"

# A server that writes first, a Go client that waits for its banner.
port=$(free_port 4)
start_server smcr banner-server socat "TCP4-LISTEN:$port,bind=127.0.0.1,reuseaddr" SYSTEM:'echo HELLO; exec cat'
banner_pid=$server_pid
wait_listen "$banner_pid" "$port"
run_client smcr go-banner 30 "$work/go_net" banner-client "127.0.0.1:$port" "$work/data"
[[ $exit_code -eq 0 ]] || fail "the Go banner client exited $exit_code: $(tail -n 3 "$work/go-banner.smcr.err")"
[[ $(cat "$work/go-banner.smcr.out") == "$want" ]] || fail "the echo after the banner differs"
wait_exit "$banner_pid" 10
assert_fallback_log banner-server PEERNOSMC 1
log "banner server: the Go client read the banner and 8 MiB of echo over TCP"

# The python server is an SMC server all the same.
echo_stream_client py-client2 "$py_port" "$work/data"
assert_smc_log py-client2 1
read -r smc fallbacks reasons <<<"$(mode_stats "$py_pid")"
[[ $smc -eq 1 && $fallbacks -eq 1 && $reasons == PEERNOSMC:1 ]] ||
    fail "the python server's stats: $smc SMC, $fallbacks fallback(s) ($reasons); expected 1 and 1 (PEERNOSMC)"
log "python server's stats: 1 SMC (python client), 1 TCP (the Go client, PEERNOSMC)"
