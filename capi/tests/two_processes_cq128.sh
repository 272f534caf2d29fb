#!/usr/bin/env bash
# ibv_rc_pingpong with 128-byte CQEs (MLX5_CQE_SIZE=128, which libmlx5 reads for every CQ it
# makes) across two processes, hosts 127.0.70.1 and 127.0.70.5 (sourced by run.sh, which
# defines pass, fail and $bin, $shim).

echo "ibv_rc_pingpong with 128-byte CQEs across two processes"
port=$((20000 + RANDOM % 20000))
MLX5_CQE_SIZE=128 MLX5SIM_ADDR=127.0.70.1 LD_LIBRARY_PATH=$shim timeout 60 \
  ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 100 -s 48 -p "$port" > "$bin/pingpong-cq128-server.log" 2>&1 &
server=$!
sleep 1
MLX5_CQE_SIZE=128 MLX5SIM_ADDR=127.0.70.5 LD_LIBRARY_PATH=$shim timeout 60 \
  ibv_rc_pingpong -d mlx5_0 -g 0 -c -n 100 -s 48 -p "$port" 127.0.70.1 > "$bin/pingpong-cq128-client.log" 2>&1
rc_c=$?
wait "$server"
rc_s=$?
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "100 iters" "$bin/pingpong-cq128-client.log" &&
  grep -q "100 iters" "$bin/pingpong-cq128-server.log"; then
  pass "ibv_rc_pingpong -c -s 48 with MLX5_CQE_SIZE=128, 127.0.70.1 and 127.0.70.5: 100 iterations, the data checked"
else
  fail "ibv_rc_pingpong with 128-byte CQEs: exits $rc_s/$rc_c: $(cat "$bin/pingpong-cq128-server.log" "$bin/pingpong-cq128-client.log" | tr '\n' ' ')"
fi
