#!/usr/bin/env bash
# librdmacm's programs across two processes (sourced by run.sh after two_processes.sh, whose
# tshark_clean it uses): the server at 127.0.36.1, the client at 127.0.36.2, each with one
# device and no VFIO function, so that each process's one port takes just its address. Every
# program is bounded by a timeout.

cm_profile=$bin/rdmacm-profile.toml
sed '/^vfio_pci_name/d' sim/profiles/cx6dx.toml > "$cm_profile"
cm_env="MLX5SIM_PROFILE=$cm_profile MLX5SIM_DEVICES=1"

# cm_pair NAME "SERVER ARGS" "CLIENT ARGS" [SERVER_ENV] [CLIENT_ENV]: the server at
# 127.0.36.1, then the client at 127.0.36.2; sets rc_s, rc_c.
cm_pair() {
  local name=$1 sargs=$2 cargs=$3 senv=${4:-} cenv=${5:-}
  env $cm_env MLX5SIM_ADDR=127.0.36.1 $senv LD_LIBRARY_PATH=$shim timeout ${cm_server_timeout:-30} stdbuf -oL $sargs > "$bin/$name-server.log" 2>&1 &
  local server=$!
  sleep 1
  # With cm_retry set, a client whose log shows it (the server not yet listening on a busy
  # machine: a REJ with reason 8) starts again, twice at most; cm_tries counts the starts.
  cm_tries=0
  while :; do
    cm_tries=$((cm_tries + 1))
    env $cm_env MLX5SIM_ADDR=127.0.36.2 $cenv LD_LIBRARY_PATH=$shim timeout 30 stdbuf -oL $cargs > "$bin/$name-client.log" 2>&1
    rc_c=$?
    if [ $rc_c != 0 ] && [ -n "${cm_retry:-}" ] && [ $cm_tries -lt 3 ] && grep -qF "$cm_retry" "$bin/$name-client.log"; then
      sleep 1
      continue
    fi
    break
  done
  wait "$server"
  rc_s=$?
}

echo "librdmacm across two processes (hosts 127.0.36.1 and 127.0.36.2)"
rm -f "$bin/rping-server.pcap" "$bin/rping-client.pcap"
cm_pair rping "rping -s -a 127.0.36.1 -C 10 -v -V" "rping -c -a 127.0.36.1 -C 10 -v -V" \
  "MLX5SIM_PCAP=$bin/rping-server.pcap" "MLX5SIM_PCAP=$bin/rping-client.pcap"
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "^ping data: rdma-ping-9: JKLM" "$bin/rping-client.log" \
   && grep -q "^server ping data: rdma-ping-9: JKLM" "$bin/rping-server.log" \
   && [ "$(grep -c '^ping data: rdma-ping-' "$bin/rping-client.log")" = 10 ]; then
  pass "rping -s / rping -c -C 10 -v -V: both exit 0, 10 pings each way, the data verified"
else
  fail "rping: exits $rc_s/$rc_c: $(tail -n 3 "$bin/rping-server.log" "$bin/rping-client.log" | tr '\n' ' ')"
fi
for side in server client; do
  msgs=$(tshark -r "$bin/rping-$side.pcap" --disable-protocol rpcordma 2> /dev/null \
    | grep -o 'CM: [A-Za-z]*' | sed 's/CM: //' | tr '\n' ' ')
  if out=$(tshark_clean "$bin/rping-$side.pcap") && echo "$msgs" | grep -q "ConnectRequest ConnectReply ReadyToUse"; then
    pass "rping's $side capture: $out RRoCE packets, clean; the CM's: $msgs"
  else
    fail "rping's $side capture: $out; the CM's: $msgs"
  fi
done
dreps=$(tshark -r "$bin/rping-server.pcap" --disable-protocol rpcordma 2> /dev/null | grep -c "CM: DisconnectReply")
if [ "${dreps:-0}" -gt 0 ]; then
  pass "the client's rdma_disconnect: a DREQ, which the server answers with a DREP"
else
  fail "no DREP in the server's capture"
fi

# A port nobody listens on: the peer's CM answers the REQ with a REJ (reason 8, invalid
# service ID), which rping gets as REJECTED with status 8.
cm_server_timeout=5 cm_pair refused "rping -s -a 127.0.36.1 -p 7000 -C 1" "rping -c -a 127.0.36.1 -p 7001 -C 1 -v"
# (rping exits -1: 255, neither a timeout's 124 nor a signal's 128 + n.)
if [ $rc_c = 255 ] && grep -q "RDMA_CM_EVENT_REJECTED, error 8" "$bin/refused-client.log"; then
  pass "rping -c to a port no one listens on: REJECTED with status 8 (invalid service ID), exit $rc_c"
else
  fail "a connection refused: client exit $rc_c: $(head -3 "$bin/refused-client.log" | tr '\n' ' ')"
fi
# (The server, left waiting for a client, ends by its 5 s timeout.)

cm_pair rdma_server "rdma_server -s 127.0.36.1" "rdma_client -s 127.0.36.1"
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "rdma_server: end 0" "$bin/rdma_server-server.log" \
   && grep -q "rdma_client: end 0" "$bin/rdma_server-client.log"; then
  pass "rdma_server / rdma_client (rdma_getaddrinfo, rdma_create_ep, rdma_get_request, sync mode): end 0"
else
  fail "rdma_server/rdma_client: exits $rc_s/$rc_c: $(cat "$bin/rdma_server-server.log" "$bin/rdma_server-client.log" | tr '\n' ' ')"
fi

cm_pair ucmatose "ucmatose -b 127.0.36.1" "ucmatose -s 127.0.36.1"
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "return status 0" "$bin/ucmatose-server.log" \
   && grep -q "return status 0" "$bin/ucmatose-client.log"; then
  pass "ucmatose server and client: data transfers complete, return status 0 on both sides"
else
  fail "ucmatose: exits $rc_s/$rc_c: $(tail -n 2 "$bin/ucmatose-server.log" "$bin/ucmatose-client.log" | tr '\n' ' ')"
fi

# perftest with -R: its control exchange and its QPs both connected through the CM (the
# listener for the first is destroyed before the second binds the same port).
for prog in ib_write_bw ib_send_lat; do
  cm_port=$((18515 + RANDOM % 2000))
  rm -f "$bin/perftest-cm.pcap"
  cm_retry="RDMA_CM_EVENT_REJECTED; error: 8" cm_pair perftest-cm "$prog -R -d mlx5_0 -n 200 -p $cm_port" \
    "$prog -R -d mlx5_0 -n 200 -p $cm_port 127.0.36.1" "" "MLX5SIM_PCAP=$bin/perftest-cm.pcap"
  late=""
  [ "$cm_tries" -gt 1 ] && late=" (the client started $cm_tries times: the server was not listening yet)"
  result=$(grep -A1 '#bytes' "$bin/perftest-cm-client.log" | tail -1 | tr -s ' \t' ' ')
  # (Counted, not grep -q: under pipefail, tshark killed by grep's early exit fails the test.)
  reqs=$(tshark -r "$bin/perftest-cm.pcap" 2> /dev/null | grep -c "CM: ConnectRequest")
  if [ $rc_s = 0 ] && [ $rc_c = 0 ] && [ -n "$result" ] && out=$(tshark_clean "$bin/perftest-cm.pcap") \
     && [ "${reqs:-0}" -gt 0 ]; then
    pass "$prog -R: both exit 0; the client reports:$result; its capture: $out RRoCE packets, clean, with the CM's REQ$late"
  else
    fail "$prog -R: exits $rc_s/$rc_c: $(tail -n 3 "$bin/perftest-cm-server.log" "$bin/perftest-cm-client.log" | tr '\n' ' ')"
  fi
done

# mckey: the receiver joins 239.1.36.1 at 127.0.36.1; the sender at 127.0.36.2 joins, waits
# 3 s as mckey does, and sends 10 datagrams of 100 bytes, which the switch's table (a
# directory of this run's own) carries to the receiver on the other host.
rm -rf "$bin/mcast" "$bin/mckey-server.pcap"
cm_pair mckey "mckey -m 239.1.36.1 -b 127.0.36.1 -C 10 -S 100" "mckey -m 239.1.36.1 -b 127.0.36.2 -s -C 10 -S 100" \
  "MLX5SIM_MCAST_DIR=$bin/mcast MLX5SIM_PCAP=$bin/mckey-server.pcap" "MLX5SIM_MCAST_DIR=$bin/mcast"
got=$(tshark -r "$bin/mckey-server.pcap" -Y "ip.dst == 239.1.36.1 && infiniband.bth.destqp == 0xffffff" 2> /dev/null | wc -l)
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "^data transfers complete" "$bin/mckey-server.log" && [ "$got" = 10 ]; then
  pass "mckey receiver and sender on two hosts: both exit 0; the receiver took 10 datagrams to 239.1.36.1 (its capture)"
else
  fail "mckey: exits $rc_s/$rc_c, $got datagrams to the group captured: $(tail -n 2 "$bin/mckey-server.log" "$bin/mckey-client.log" | tr '\n' ' ')"
fi
