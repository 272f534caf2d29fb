#!/usr/bin/env bash
# Atomics on DC across two processes (sourced by run.sh after two_processes_dc.sh):
# capi/tests/dc_atomics.c, the DCT's side on 127.0.71.1, the DCI's on 127.0.71.2: compare-and-
# swap and fetch-and-add in the simulator's DC encoding (0xd3 and 0xd4: RC's 0x13 and 0x14
# plus 0xc0, a DCETH; docs/behaviour.md items 259, 330), answered by plain ATOMIC Acknowledges
# (0x12). Then again, the DCT's side on 127.0.71.3, with requests and answers lost on the way:
# the DCI sends them again, and each executes once (item 331).

echo "DC atomics across two processes"
if cc -Wall -Werror -O1 capi/tests/dc_atomics.c -o "$bin/dc_atomics" -libverbs -lmlx5; then
  grep -v vfio_pci_name sim/profiles/cx6dx.toml | sed 's/^name = "cx6dx"/name = "cx6dx-one-port"/' > "$bin/dca-cx6dx.toml"
  # dc_atomics_pair NAME SERVER_ENV CLIENT_ENV: both sides; sets rc_s and rc_c.
  dc_atomics_pair() {
    rm -f "$bin/$1.addr" "$bin/$1.pcap"
    env MLX5SIM_PROFILE="$bin/dca-cx6dx.toml" MLX5SIM_DEVICES=1 $2 LD_LIBRARY_PATH=$shim \
      timeout 90 "$bin/dc_atomics" server "$bin/$1.addr" > "$bin/$1-server.log" 2>&1 &
    local server=$!
    env MLX5SIM_PROFILE="$bin/dca-cx6dx.toml" MLX5SIM_DEVICES=1 $3 MLX5SIM_PCAP="$bin/$1.pcap" LD_LIBRARY_PATH=$shim \
      timeout 90 "$bin/dc_atomics" client "$bin/$1.addr" > "$bin/$1-client.log" 2>&1
    rc_c=$?
    wait "$server"
    rc_s=$?
  }
  dc_atomics_pair dca "MLX5SIM_ADDR=127.0.71.1" "MLX5SIM_ADDR=127.0.71.2"
  if [ $rc_c = 0 ] && [ $rc_s = 0 ]; then
    pass "DC atomics between 127.0.71.1 and 127.0.71.2: $(tail -1 "$bin/dca-client.log"); $(tail -1 "$bin/dca-server.log")"
  else
    fail "DC atomics between two processes: exits $rc_s/$rc_c: $(cat "$bin/dca-server.log" "$bin/dca-client.log" | tail -n 4 | tr '\n' ' ')"
  fi
  if command -v tshark > /dev/null; then
    ops=$(tshark -r "$bin/dca.pcap" -T fields -e infiniband.bth.opcode 2> /dev/null | sort -un | tr '\n' ' ')
    if [ "$ops" = "18 211 212 " ]; then
      pass "the DCI's capture: opcodes $ops(DC CmpSwap and FetchAdd in the simulator's encoding, ATOMIC Acknowledges)"
    else
      fail "the DCI's capture: opcodes '$ops'"
    fi
  fi
  # The DCT's side loses 10% of its ATOMIC Acknowledges, the DCI's side 5% of its FetchAdds
  # (a rule's opcode is the RC twin a DC request decodes to).
  dc_atomics_pair dca-lossy "MLX5SIM_ADDR=127.0.71.3 MLX5SIM_NET_FAULTS=drop,opcode=0x12,p=0.1,seed=3" \
    "MLX5SIM_ADDR=127.0.71.2 MLX5SIM_NET_FAULTS=drop,opcode=0x14,p=0.05,seed=4"
  resent=0
  if command -v tshark > /dev/null; then
    # A request sent again carries the PSN of one sent before.
    resent=$(tshark -r "$bin/dca-lossy.pcap" -Y 'infiniband.bth.opcode == 212' -T fields -e infiniband.bth.psn \
      2> /dev/null | sort | uniq -d | wc -l)
  fi
  if [ $rc_c = 0 ] && [ $rc_s = 0 ] && { [ "$resent" -gt 0 ] || ! command -v tshark > /dev/null; }; then
    pass "DC atomics with 10% of the answers and 5% of the fetch-and-adds lost: $resent sent again; $(tail -1 "$bin/dca-lossy-client.log"); $(tail -1 "$bin/dca-lossy-server.log")"
  else
    fail "DC atomics with loss: exits $rc_s/$rc_c, $resent resent: $(cat "$bin/dca-lossy-server.log" "$bin/dca-lossy-client.log" | tail -n 4 | tr '\n' ' ')"
  fi
else
  fail "dc_atomics does not build"
fi
