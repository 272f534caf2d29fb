#!/usr/bin/env bash
# On-demand paging across two processes (sourced by run.sh after two_processes.sh, whose pair
# it uses): ibv_rc_pingpong with an explicit ODP MR, with one prefetched by ibv_advise_mr, and
# with an implicit ODP MR; perftest's --odp WRITE and SEND bandwidth tests. Server at
# 127.0.34.1, client at 127.0.34.2: each process has one port (port i of a process takes its
# address plus i), so one mlx5 device and cx6dx's profile without its VFIO function.

echo "on-demand paging across two processes (hosts 127.0.34.1 and 127.0.34.2)"
grep -v '^vfio_pci_name' sim/profiles/cx6dx.toml | sed 's/^name = "cx6dx"/name = "cx6dx-one-port"/' > "$bin/odp-one-port.toml"
one="MLX5SIM_PROFILE=$bin/odp-one-port.toml MLX5SIM_DEVICES=1"
for opts in "-o" "-o -P" "-O" "-O -P"; do
  port=$((port + 1))
  pair odp-pingpong "$one MLX5SIM_ADDR=127.0.34.1" "$one MLX5SIM_ADDR=127.0.34.2" \
    ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 200 -s 8192 $opts -p "$port"
  if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "200 iters" "$bin/odp-pingpong-client.log" \
    && grep -q "200 iters" "$bin/odp-pingpong-server.log"; then
    pass "ibv_rc_pingpong -c $opts: 200 iterations of 8192 bytes through ODP MRs, the data checked on both sides"
  else
    fail "ibv_rc_pingpong $opts: exits $rc_s/$rc_c: $(cat "$bin/odp-pingpong-client.log" "$bin/odp-pingpong-server.log" | tail -n 6 | tr '\n' ' ')"
  fi
done
for prog in ib_write_bw ib_send_bw; do
  port=$((port + 1))
  pair odp-perf "$one MLX5SIM_ADDR=127.0.34.1" "$one MLX5SIM_ADDR=127.0.34.2" $prog -d mlx5_0 -n 500 --odp -p "$port"
  result=$(grep -A1 '#bytes' "$bin/odp-perf-client.log" | tail -1 | tr -s ' \t' ' ')
  if [ $rc_c = 0 ] && [ $rc_s = 0 ] && [ -n "$result" ]; then
    pass "$prog --odp: both exit 0; the client reports:$result"
  else
    fail "$prog --odp: exits $rc_s/$rc_c: $(tail -4 "$bin/odp-perf-client.log" | tr '\n' ' ')"
  fi
done
