#!/usr/bin/env bash
# DC across two processes (sourced by run.sh after two_processes.sh, whose `tshark_clean`
# conventions it follows): capi/tests/dc/dc_peer.c, the DCT's side on 127.0.63.1, the DCI's on
# 127.0.63.2. The requests carry the simulator's own DC encoding (opcodes 0xc0 plus RC's, a
# DCETH: docs/behaviour.md items 259 and 260), which no dissector decodes: the capture is
# checked for its opcodes only.

echo "DC across two processes"
if cc -Wall -Werror -O1 capi/tests/dc/dc_peer.c -o "$bin/dc_peer" -libverbs -lmlx5; then
  grep -v vfio_pci_name sim/profiles/cx6dx.toml | sed 's/^name = "cx6dx"/name = "cx6dx-one-port"/' > "$bin/dc-cx6dx.toml"
  rm -f "$bin/dc-peer.addr" "$bin/dc-client.pcap"
  env MLX5SIM_PROFILE="$bin/dc-cx6dx.toml" MLX5SIM_DEVICES=1 MLX5SIM_ADDR=127.0.63.1 LD_LIBRARY_PATH=$shim \
    timeout 60 "$bin/dc_peer" server "$bin/dc-peer.addr" > "$bin/dc-server.log" 2>&1 &
  dc_server=$!
  env MLX5SIM_PROFILE="$bin/dc-cx6dx.toml" MLX5SIM_DEVICES=1 MLX5SIM_ADDR=127.0.63.2 \
    MLX5SIM_PCAP="$bin/dc-client.pcap" LD_LIBRARY_PATH=$shim \
    timeout 60 "$bin/dc_peer" client "$bin/dc-peer.addr" > "$bin/dc-client.log" 2>&1
  rc_c=$?
  wait "$dc_server"
  rc_s=$?
  if [ $rc_c = 0 ] && [ $rc_s = 0 ]; then
    pass "DC between 127.0.63.1 and 127.0.63.2: $(tail -1 "$bin/dc-client.log"); $(tail -1 "$bin/dc-server.log")"
  else
    fail "DC between two processes: exits $rc_s/$rc_c: $(cat "$bin/dc-server.log" "$bin/dc-client.log" | tail -n 4 | tr '\n' ' ')"
  fi
  # The DCI's requests: DC WRITE First/Middle/Last (0xc6-0xc8), READ Request (0xcc), SEND
  # First/Middle/Last (0xc0-0xc2); the answers plain RC READ responses (0x0d-0x0f) and ACKs
  # (0x11).
  if command -v tshark > /dev/null; then
    ops=$(tshark -r "$bin/dc-client.pcap" -T fields -e infiniband.bth.opcode 2> /dev/null | sort -un | tr '\n' ' ')
    if [ "$ops" = "13 14 15 17 192 193 194 198 199 200 204 " ]; then
      pass "the DCI's capture: opcodes $ops(DC requests in the simulator's encoding, RC answers)"
    else
      fail "the DCI's capture: opcodes '$ops'"
    fi
  fi
else
  fail "dc_peer does not build"
fi
