#!/usr/bin/env bash
# SRQ programs across two processes on the simulated network (sourced by run.sh after
# two_processes.sh, whose `pair` it uses). Hosts 127.0.23.1 (server) and 127.0.24.1 (client).

echo "shared receive queues across two processes"
port=$((40000 + RANDOM % 10000))
pair srq-pingpong "MLX5SIM_ADDR=127.0.23.1" "MLX5SIM_ADDR=127.0.24.1" \
  ibv_srq_pingpong -d mlx5_0 -g 0 -c -q 8 -r 64 -n 200 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "200 iters" "$bin/srq-pingpong-client.log" \
  && grep -q "200 iters" "$bin/srq-pingpong-server.log"; then
  pass "ibv_srq_pingpong -c -q 8 -r 64: 8 QPs on one SRQ each side, 200 iterations, the data checked"
else
  fail "ibv_srq_pingpong: exits $rc_s/$rc_c: $(cat "$bin/srq-pingpong-server.log" "$bin/srq-pingpong-client.log" | tail -n 6 | tr '\n' ' ')"
fi
port=$((port + 1))
pair srq-pingpong-default "MLX5SIM_ADDR=127.0.23.2" "MLX5SIM_ADDR=127.0.24.2" \
  ibv_srq_pingpong -d mlx5_0 -g 0 -s 1000 -n 300 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "300 iters" "$bin/srq-pingpong-default-client.log"; then
  pass "ibv_srq_pingpong with its defaults (16 QPs, 500 receives posted at a time), 300 iterations of 1000 bytes"
else
  fail "ibv_srq_pingpong defaults: exits $rc_s/$rc_c: $(tail -n 4 "$bin/srq-pingpong-default-client.log" | tr '\n' ' ')"
fi
port=$((port + 1))
pair send-bw-srq "MLX5SIM_ADDR=127.0.23.3" "MLX5SIM_ADDR=127.0.24.3" \
  ib_send_bw -d mlx5_0 --use-srq -n 2000 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "Using SRQ *: ON" "$bin/send-bw-srq-server.log" \
  && grep -Eq "^ *65536 +2000 " "$bin/send-bw-srq-server.log" && grep -Eq "^ *65536 +2000 " "$bin/send-bw-srq-client.log"; then
  pass "ib_send_bw --use-srq: 2000 SENDs of 64 KiB into the server's SRQ ($(awk '/^ *65536 +2000/ {print $4 " MB/s"}' "$bin/send-bw-srq-server.log"))"
else
  fail "ib_send_bw --use-srq: exits $rc_s/$rc_c: $(tail -n 3 "$bin/send-bw-srq-server.log" "$bin/send-bw-srq-client.log" | tr '\n' ' ')"
fi
