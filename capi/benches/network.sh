#!/usr/bin/env bash
# The simulated network against what the OS gives (`make bench`; needs `make shim`): in each
# round, side by side, a UDP stream of 4 KiB datagrams between two processes against
# ib_write_bw's 64 KiB WRITEs (one QP and -q 4), and a busy-polling UDP ping-pong of 2-byte
# datagrams against ib_send_lat's 2-byte SENDs (half round trips), and the same ping-pong with
# each message acknowledged and the acknowledgement waited for, as ib_send_lat (tx depth 1: every
# SEND signalled and its completion awaited) waits for RC's ACK, also with the acknowledgement
# and the answer in one sendmmsg and taken with recvmmsg. Addresses in 127.0.0.0/8.
#   capi/benches/network.sh [ROUNDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
shim=target/shim
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
[ -e "$shim/libibverbs.so.1" ] || { echo "no $shim: run make shim first"; exit 1; }
cc -O2 -Wall -Werror capi/benches/net_floor.c -o "$out/net_floor" || exit 1
port=$((20000 + RANDOM % 20000))

# perftest between 127.0.1.1 and 127.0.2.1; prints the client's result line.
perftest() {
  port=$((port + 1))
  MLX5SIM_ADDR=127.0.1.1 LD_LIBRARY_PATH=$shim timeout 120 "$@" -p "$port" > "$out/server.log" 2>&1 &
  local s=$!
  sleep 1
  MLX5SIM_ADDR=127.0.2.1 LD_LIBRARY_PATH=$shim timeout 120 "$@" -p "$port" 127.0.0.1 > "$out/client.log" 2>&1
  wait "$s"
  grep -A1 '#bytes' "$out/client.log" | tail -1
}
floor_stream() {
  port=$((port + 1))
  "$out/net_floor" stream-recv 127.0.1.1 "$port" 67108864 > "$out/recv.log" &
  local r=$!
  sleep 0.3
  "$out/net_floor" stream-send 127.0.1.1 "$port" 67108864 4096
  wait "$r"
  awk '{print $1}' "$out/recv.log"
}
# A ping-pong floor's median half round trip: pp (plain), ack (each message acknowledged and
# the acknowledgement waited for, RC's ACK), batch (the acknowledgement and the answer in one
# sendmmsg, taken with recvmmsg).
floor_pingpong() {
  port=$((port + 1))
  "$out/net_floor" "$1-server" 127.0.1.1 "$port" 20000 &
  local s=$!
  sleep 0.3
  "$out/net_floor" "$1-client" 127.0.1.1 "$port" 20000 | awk '{print $1}'
  kill "$s" 2> /dev/null
  wait "$s" 2> /dev/null
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: > "$out/bw1"; : > "$out/bw4"; : > "$out/lat"; : > "$out/acked"
for r in $(seq 1 "$rounds"); do
  floor=$(floor_stream)
  one=$(perftest ib_write_bw -d mlx5_0 -s 65536 -n 2000 | awk '{print $4}')
  four=$(perftest ib_write_bw -d mlx5_0 -s 65536 -n 1000 -q 4 | awk '{print $4}')
  pp=$(floor_pingpong pp)
  acked=$(floor_pingpong ack)
  batched=$(floor_pingpong batch)
  lat=$(perftest ib_send_lat -d mlx5_0 -s 2 -n 2000 | awk '{print $5}')
  echo "round $r: UDP stream $floor MB/s; ib_write_bw $one MB/s ($(ratio "$one" "$floor")), -q 4 $four MB/s" \
    "($(ratio "$four" "$floor")); UDP ping-pong $pp us, acknowledged $acked us (batched $batched us);" \
    "ib_send_lat typical $lat us ($(ratio "$lat" "$pp"), $(ratio "$lat" "$acked") of the acknowledged)"
  ratio "$one" "$floor" >> "$out/bw1"; echo >> "$out/bw1"
  ratio "$four" "$one" >> "$out/bw4"; echo >> "$out/bw4"
  ratio "$lat" "$pp" >> "$out/lat"; echo >> "$out/lat"
  ratio "$lat" "$acked" >> "$out/acked"; echo >> "$out/acked"
done
echo "median over $rounds rounds: ib_write_bw / UDP stream $(median < "$out/bw1") (goal >= 0.5);" \
  "-q 4 / one QP $(median < "$out/bw4") (goal >= 1); ib_send_lat / UDP ping-pong $(median < "$out/lat") (goal <= 1.5;" \
  "$(median < "$out/acked") of the acknowledged ping-pong)"
