#!/usr/bin/env bash
# DC messages sent again between two processes (sourced by run.sh after
# two_processes_dc_atomics.sh): capi/tests/dc/dc_resend.c, the DCT's side on 127.0.72.1, the
# DCI's on 127.0.72.2, then again with the DCT's side on 127.0.72.3. The DCT's side loses ACKs
# (0x11) and the DCI's side SENDs (a rule's opcode is the RC twin a DC request decodes to):
# the DCI sends again go-back-N, and the DCT receives each message once and in order, a
# duplicate acknowledged without a receive and a request after a lost one NAKed (items 337
# and 338); the DCI's reset halfway starts its stream anew.

echo "DC messages sent again across two processes"
if cc -Wall -Werror -O1 capi/tests/dc/dc_resend.c -o "$bin/dc_resend" -libverbs -lmlx5; then
  grep -v vfio_pci_name sim/profiles/cx6dx.toml | sed 's/^name = "cx6dx"/name = "cx6dx-one-port"/' > "$bin/dcr-cx6dx.toml"
  # dc_resend_pair NAME SERVER_ENV CLIENT_ENV: both sides; sets rc_s and rc_c.
  dc_resend_pair() {
    rm -f "$bin/$1.addr" "$bin/$1.addr.done" "$bin/$1.pcap"
    env MLX5SIM_PROFILE="$bin/dcr-cx6dx.toml" MLX5SIM_DEVICES=1 $2 LD_LIBRARY_PATH=$shim \
      timeout 120 "$bin/dc_resend" server "$bin/$1.addr" > "$bin/$1-server.log" 2>&1 &
    local server=$!
    env MLX5SIM_PROFILE="$bin/dcr-cx6dx.toml" MLX5SIM_DEVICES=1 $3 MLX5SIM_PCAP="$bin/$1.pcap" LD_LIBRARY_PATH=$shim \
      timeout 120 "$bin/dc_resend" client "$bin/$1.addr" > "$bin/$1-client.log" 2>&1
    rc_c=$?
    wait "$server"
    rc_s=$?
  }
  for run in "1 drop,opcode=0x11,p=0.1,seed=7 drop,opcode=0x04,p=0.05,seed=8" \
    "3 drop,opcode=0x11,p=0.2,seed=9 drop,opcode=0x05,p=0.1,seed=10"; do
    read -r n sfaults cfaults <<< "$run"
    dc_resend_pair "dcr-$n" "MLX5SIM_ADDR=127.0.72.$n MLX5SIM_NET_FAULTS=$sfaults" \
      "MLX5SIM_ADDR=127.0.72.2 MLX5SIM_NET_FAULTS=$cfaults"
    resent=0 naks=0
    if command -v tshark > /dev/null; then
      # The DCI's requests (DC SEND, SEND with immediate, WRITE with immediate: 0xc4, 0xc5,
      # 0xcb; one packet each) past one per message: those it sent again.
      sent=$(tshark -r "$bin/dcr-$n.pcap" -Y 'infiniband.bth.opcode >= 0xc0' -T fields \
        -e infiniband.bth.psn 2> /dev/null | wc -l)
      resent=$((sent - 168))
      # Sequence error NAKs (AETH syndrome 0x60) the DCT sent for a request after a lost one.
      naks=$(tshark -r "$bin/dcr-$n.pcap" -Y 'infiniband.aeth.syndrome == 0x60' 2> /dev/null | wc -l)
    fi
    if [ $rc_c = 0 ] && [ $rc_s = 0 ] && { [ "$resent" -gt 0 ] || ! command -v tshark > /dev/null; }; then
      pass "DC messages with ACKs ($sfaults) and requests ($cfaults) lost, 127.0.72.$n and 127.0.72.2: $resent requests sent again, $naks sequence error NAKs; $(tail -1 "$bin/dcr-$n-client.log"); $(tail -1 "$bin/dcr-$n-server.log")"
    else
      fail "DC messages with loss, 127.0.72.$n: exits $rc_s/$rc_c, $resent resent: $(cat "$bin/dcr-$n-server.log" "$bin/dcr-$n-client.log" | tail -n 4 | tr '\n' ' ')"
    fi
  done
else
  fail "dc_resend does not build"
fi
