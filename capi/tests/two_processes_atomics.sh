#!/usr/bin/env bash
# RC atomics across two processes (sourced by run.sh after two_processes.sh, whose pair and
# tshark_clean it uses): perftest's atomic tests, server at 127.0.21.1 and client at
# 127.0.22.1, the client's capture checked with tshark; then the same with loss on both
# sides, so that atomics are sent again and answered from the responder's replay cache.

echo "perftest atomics across two processes (hosts 127.0.21.1 and 127.0.22.1)"
for prog in ib_atomic_bw ib_atomic_lat; do
  for opts in "" "-A CMP_AND_SWAP" "-A FETCH_AND_ADD"; do
    port=$((port + 1))
    rm -f "$bin/atomic.pcap"
    pair atomic "MLX5SIM_ADDR=127.0.21.1" "MLX5SIM_ADDR=127.0.22.1 MLX5SIM_PCAP=$bin/atomic.pcap" \
      $prog -d mlx5_0 -n 200 -p "$port" $opts
    result=$(grep -A1 '#bytes' "$bin/atomic-client.log" | tail -1 | tr -s ' \t' ' ')
    kind=$(grep -o 'Atomic [A-Z_]* [A-Za-z]* Test' "$bin/atomic-client.log")
    # Every request and every answer of the run, none malformed: 200 of each at least.
    ops=$(tshark -r "$bin/atomic.pcap" --disable-protocol rpcordma 2> /dev/null | grep -cE 'RC (Fetch Add|Compare Swap) ')
    if [ $rc_c = 0 ] && [ $rc_s = 0 ] && [ -n "$result" ] && [ "$ops" -ge 200 ] \
      && packets=$(tshark_clean "$bin/atomic.pcap"); then
      pass "$prog $opts ($kind): both exit 0; the client reports:$result; capture: $packets RRoCE packets, $ops atomic requests, clean"
    else
      fail "$prog $opts: exits $rc_s/$rc_c, $ops atomic requests: $(tail -4 "$bin/atomic-client.log" | tr '\n' ' ') capture: $packets"
    fi
  done
done

port=$((port + 1))
rm -f "$bin/atomic-lossy.pcap"
# Both ways: requests (FETCH_ADD, 0x14) and their answers (ATOMIC Acknowledge, 0x12) lost.
# A lost answer is asked for again as soon as a later one shows it lost (an implied NAK) and
# answered from the responder's replay cache.
pair atomic-lossy "MLX5SIM_ADDR=127.0.21.2 MLX5SIM_NET_FAULTS=drop,opcode=0x12,p=0.03,seed=3" \
  "MLX5SIM_ADDR=127.0.22.2 MLX5SIM_NET_FAULTS=drop,opcode=0x14,p=0.03,seed=4 MLX5SIM_PCAP=$bin/atomic-lossy.pcap" \
  ib_atomic_bw -d mlx5_0 -n 300 -p "$port"
result=$(grep -A1 '#bytes' "$bin/atomic-lossy-client.log" | tail -1 | tr -s ' \t' ' ')
# A request sent again carries the PSN of one sent before: tshark lists repeated PSNs.
resent=$(tshark -r "$bin/atomic-lossy.pcap" --disable-protocol rpcordma -Y 'infiniband.bth.opcode == 20' \
  -T fields -e infiniband.bth.psn 2> /dev/null | sort | uniq -d | wc -l)
if [ $rc_c = 0 ] && [ $rc_s = 0 ] && [ -n "$result" ] && [ "$resent" -gt 0 ] \
  && packets=$(tshark_clean "$bin/atomic-lossy.pcap"); then
  pass "ib_atomic_bw with 3% of the atomic requests and 3% of their answers dropped: both exit 0;$result; $resent atomics sent again; capture clean ($packets)"
else
  fail "ib_atomic_bw with loss: exits $rc_s/$rc_c, $resent resent: $(tail -3 "$bin/atomic-lossy-client.log" | tr '\n' ' ') $packets"
fi
