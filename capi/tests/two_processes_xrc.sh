#!/usr/bin/env bash
# XRC across two processes on the simulated network (sourced by run.sh after
# two_processes.sh, whose `pair` and `tshark_clean` it uses): rdma-core's ibv_xsrq_pingpong,
# server on 127.0.32.1, client on 127.0.32.2. Each process has one RoCE port (a cx6dx
# profile without its VFIO function, whose port would take the next address).

echo "XRC across two processes"
grep -v vfio_pci_name sim/profiles/cx6dx.toml | sed 's/^name = "cx6dx"/name = "cx6dx-one-port"/' > "$bin/xrc-cx6dx.toml"
one="MLX5SIM_PROFILE=$bin/xrc-cx6dx.toml MLX5SIM_DEVICES=1"
port=$((50000 + RANDOM % 10000))
rm -f "$bin"/xsrq-*.pcap
pair xsrq "$one MLX5SIM_ADDR=127.0.32.1 MLX5SIM_PCAP=$bin/xsrq-server.pcap" \
  "$one MLX5SIM_ADDR=127.0.32.2 MLX5SIM_PCAP=$bin/xsrq-client.pcap" \
  ibv_xsrq_pingpong -d mlx5_0 -g 0 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "^success" "$bin/xsrq-client.log" && grep -q "^success" "$bin/xsrq-server.log" \
  && grep -q "SRQN 0000" "$bin/xsrq-client.log"; then
  pass "ibv_xsrq_pingpong (XRC domain by file, XRC SRQ, XRC_SEND/XRC_RECV QPs): 5 SENDs of 4096 bytes each way, both succeed"
else
  fail "ibv_xsrq_pingpong: exits $rc_s/$rc_c: $(cat "$bin/xsrq-server.log" "$bin/xsrq-client.log" | tail -n 6 | tr '\n' ' ')"
fi
for side in server client; do
  if out=$(tshark_clean "$bin/xsrq-$side.pcap"); then
    ops=$(tshark -r "$bin/xsrq-$side.pcap" --disable-protocol rpcordma --disable-protocol crtp -T fields -e infiniband.bth.opcode 2> /dev/null | sort -u | tr '\n' ' ')
    if [ "$ops" = "160 161 162 177 " ]; then
      pass "the $side's XRC capture: tshark decodes $out packets (XRC SEND First/Middle/Last, XRC Acknowledge), none malformed or in error"
    else
      fail "the $side's XRC capture: opcodes $ops, not the XRC SENDs and ACKs"
    fi
  else
    fail "the $side's XRC capture: $out"
  fi
done
port=$((port + 1))
pair xsrq-events "$one MLX5SIM_ADDR=127.0.32.1" "$one MLX5SIM_ADDR=127.0.32.2" \
  ibv_xsrq_pingpong -d mlx5_0 -g 0 -e -n 200 -s 1000 -m 1024 -p "$port"
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && grep -q "^success" "$bin/xsrq-events-client.log" \
  && grep -q "^success" "$bin/xsrq-events-server.log"; then
  pass "ibv_xsrq_pingpong -e -n 200 -s 1000 -m 1024: 200 SENDs each way, waiting on completion events"
else
  fail "ibv_xsrq_pingpong -e: exits $rc_s/$rc_c: $(cat "$bin/xsrq-events-server.log" "$bin/xsrq-events-client.log" | tail -n 6 | tr '\n' ' ')"
fi
