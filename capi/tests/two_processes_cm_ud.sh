#!/usr/bin/env bash
# librdmacm's UD port space (SIDR) and its failures across two processes (sourced by run.sh
# after two_processes.sh, whose pass/fail and tshark_clean it uses). Hosts 127.0.40.x to
# 127.0.42.x, one device each; every program under `timeout`.
# capi/tests/cm/cm_peer.c is the side of an exchange a test needs when no shipped program
# makes it (a reject, a peer that dies); capi/tests/cm/pcap_mads.py reads SIDR's MADs
# (tshark names them but does not dissect them).

ud_profile=$bin/cm-ud-profile.toml
sed '/^vfio_pci_name/d' sim/profiles/cx6dx.toml > "$ud_profile"
ud_env="MLX5SIM_PROFILE=$ud_profile MLX5SIM_DEVICES=1"
cc -Wall -Werror -O1 capi/tests/cm/cm_peer.c -o "$bin/cm_peer" -lrdmacm -libverbs || fail "cm_peer does not build"
# The knobs that shorten the CM's retries for the tests of a peer that does not answer:
# 2^12 x 4.096 us (16 ms) of response timeout, so a REQ waits 2 x 256 ms + 16 ms, twice again.
cm_fast="MLX5SIM_CM_RESPONSE_TIMEOUT=12 MLX5SIM_CM_MAX_RETRIES=2"

# ud_pair NAME SERVER_HOST "SERVER ARGS" CLIENT_HOST "CLIENT ARGS" [SERVER_ENV] [CLIENT_ENV]
ud_pair() {
  local name=$1 sh=$2 sargs=$3 ch=$4 cargs=$5 senv=${6:-} cenv=${7:-}
  env $ud_env MLX5SIM_ADDR=$sh $senv LD_LIBRARY_PATH=$shim timeout 30 $sargs > "$bin/$name-server.log" 2>&1 &
  local server=$!
  sleep 1
  env $ud_env MLX5SIM_ADDR=$ch $cenv LD_LIBRARY_PATH=$shim timeout 30 $cargs > "$bin/$name-client.log" 2>&1
  rc_c=$?
  wait "$server"
  rc_s=$?
}

echo "librdmacm's UD port space (SIDR) across two processes (hosts 127.0.40.1 and 127.0.40.2)"
rm -f "$bin/udaddy-client.pcap"
ud_pair udaddy 127.0.40.1 "udaddy -b 127.0.40.1" 127.0.40.2 "udaddy -s 127.0.40.1" "" "MLX5SIM_PCAP=$bin/udaddy-client.pcap"
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "return status 0" "$bin/udaddy-server.log" \
   && grep -q "data transfers complete" "$bin/udaddy-client.log" && grep -q "return status 0" "$bin/udaddy-client.log"; then
  pass "udaddy -b / udaddy -s: SIDR resolves the server's QP, 10 datagrams each way, data transfers complete, return status 0 on both sides"
else
  fail "udaddy: exits $rc_s/$rc_c: $(tail -n 3 "$bin/udaddy-server.log" "$bin/udaddy-client.log" | tr '\n' ' ')"
fi
names=$(tshark -r "$bin/udaddy-client.pcap" 2> /dev/null | grep -o 'CM: [A-Za-z]*' | sed 's/CM: //' | tr '\n' ' ')
mads=$(/usr/bin/python3 capi/tests/cm/pcap_mads.py "$bin/udaddy-client.pcap" 2> /dev/null)
qpn=$(echo "$mads" | awk '$1 == "SIDR_REP" && $3 == 0 && $5 == "0x1234567" {print $4}')
req=$(echo "$mads" | awk '$1 == "SIDR_REQ" {print $2, $3}')
rep=$(echo "$mads" | awk '$1 == "SIDR_REP" {print $2}')
sends=$(echo "$mads" | grep -c "^UD $qpn 0x1234567$")
if out=$(tshark_clean "$bin/udaddy-client.pcap") && [ "$names" = "ServiceIDResReq ServiceIDResReqResp " ] \
   && [ -n "$qpn" ] && [ "${req#* }" = "0x1111c06" ] && [ "${req% *}" = "$rep" ] && [ "$sends" = 10 ]; then
  pass "udaddy's capture: $out RRoCE packets, clean; $names(service ID $(echo $req | cut -d' ' -f2): UDP port 7174); the SIDR_REP's QPN $qpn and Q_Key 0x1234567 are where the client's 10 UD SENDs go"
else
  fail "udaddy's capture: $out; the CM's: $names; the MADs: $(echo $mads | head -c 300)"
fi

port=$((7200 + RANDOM % 1000))
ud_pair ud-param 127.0.40.3 "$bin/cm_peer server 127.0.40.3 $port idle" 127.0.40.4 "$bin/cm_peer client 127.0.40.3 $port ud"
ud_pair ud-accept 127.0.40.3 "udaddy -b 127.0.40.3 -C 0" 127.0.40.4 "$bin/cm_peer client 127.0.40.3 7174 ud"
if grep -q "event RDMA_CM_EVENT_UNREACHABLE status 1 " "$bin/ud-param-client.log" \
   && grep -q "^ud: qp_num 0x[0-9a-f]* qkey 0x1234567 private_data_len 136 ah: is_global 1 dgid ::ffff:127.0.40.3 hop_limit 64" "$bin/ud-accept-client.log"; then
  pass "SIDR to a port nobody listens on: UNREACHABLE, status 1 (unsupported); accepted: ESTABLISHED with $(grep -o 'qp_num.*' "$bin/ud-accept-client.log")"
else
  fail "SIDR's events: $(cat "$bin/ud-param-client.log" "$bin/ud-accept-client.log" | tr '\n' ' ')"
fi
ud_pair ud-reject 127.0.40.5 "$bin/cm_peer server 127.0.40.5 $port ud-reject" 127.0.40.6 "$bin/cm_peer client 127.0.40.5 $port ud"
if grep -q "request: private_data_len 180 'hello'" "$bin/ud-reject-server.log" \
   && grep -q "event RDMA_CM_EVENT_UNREACHABLE status 2 " "$bin/ud-reject-client.log" \
   && grep -q "unreachable: private_data_len 136 'no thanks'" "$bin/ud-reject-client.log"; then
  pass "rdma_reject of a UD request (180 bytes of private data): the client's UNREACHABLE, status 2 (rejected), with the 136 bytes of the SIDR_REP's data"
else
  fail "a rejected UD request: $(cat "$bin/ud-reject-server.log" "$bin/ud-reject-client.log" | tr '\n' ' ')"
fi

echo "a peer that vanishes mid-handshake (the CM's retries shortened: $cm_fast)"
# The server dies at the CONNECT_REQUEST: the client's REQ goes 3 times, 528 ms apart.
ud_pair vanish-req 127.0.41.1 "$bin/cm_peer server 127.0.41.1 $port vanish" 127.0.41.2 "$bin/cm_peer client 127.0.41.1 $port rc" "" "$cm_fast"
t=$(grep -o "UNREACHABLE status -110 after [0-9]* ms" "$bin/vanish-req-client.log" | awk '{print $5}')
if grep -q "^request" "$bin/vanish-req-server.log" && [ -n "$t" ] && [ "$t" -ge 1500 ] && [ "$t" -lt 3000 ]; then
  pass "the server dies after the REQ: the client's UNREACHABLE, status -110 (ETIMEDOUT), after $t ms (3 x 528 ms)"
else
  fail "a server that dies after the REQ: $(cat "$bin/vanish-req-server.log" "$bin/vanish-req-client.log" | tr '\n' ' ')"
fi
# The client dies at the REP (no RTU): the server's REP goes as often and as far apart as the
# client's REQ asked (16 ms, 2 retries), though the server runs with the kernel's defaults.
ud_pair vanish-rep 127.0.41.7 "$bin/cm_peer server 127.0.41.7 $port rep-lost" 127.0.41.8 "$bin/cm_peer client 127.0.41.7 $port rc-rep-vanish" "" "$cm_fast"
t=$(grep -o "UNREACHABLE status -110 after [0-9]* ms" "$bin/vanish-rep-server.log" | awk '{print $5}')
if grep -q "CONNECT_RESPONSE" "$bin/vanish-rep-client.log" && [ -n "$t" ] && [ "$t" -ge 40 ] && [ "$t" -lt 1000 ]; then
  pass "the client dies after the REP: the server's UNREACHABLE, status -110, after $t ms (3 x 16 ms, as the REQ asked)"
else
  fail "a client that dies after the REP: $(cat "$bin/vanish-rep-server.log" "$bin/vanish-rep-client.log" | tr '\n' ' ')"
fi
# A UD request unanswered for good (the server died at it): UNREACHABLE, -110, after 3 x 16 ms.
ud_pair vanish-sidr 127.0.41.3 "$bin/cm_peer server 127.0.41.3 $port ud-vanish" 127.0.41.4 "$bin/cm_peer client 127.0.41.3 $port ud" "" "$cm_fast"
if grep -q "event RDMA_CM_EVENT_UNREACHABLE status -110 " "$bin/vanish-sidr-client.log"; then
  pass "a SIDR_REQ nobody answers: $(grep -o 'UNREACHABLE status -110 after [0-9]* ms' "$bin/vanish-sidr-client.log") (3 x 16 ms)"
else
  fail "an unanswered SIDR_REQ: $(cat "$bin/vanish-sidr-client.log" | tr '\n' ' ')"
fi
# Established, then the server dies: the client's DREQ goes unanswered, DISCONNECTED with
# -110, and time-wait ends in TIMEWAIT_EXIT about 1 s later.
ud_pair vanish-est 127.0.41.5 "$bin/cm_peer server 127.0.41.5 $port est-vanish" 127.0.41.6 "$bin/cm_peer client 127.0.41.5 $port rc-est" "" "$cm_fast"
t=$(grep -o "DISCONNECTED status -110 after [0-9]* ms" "$bin/vanish-est-client.log" | awk '{print $5}')
if [ $rc_c = 0 ] && [ -n "$t" ] && [ "$t" -ge 1500 ] && [ "$t" -lt 3000 ] \
   && grep -q "TIMEWAIT_EXIT status 0" "$bin/vanish-est-client.log"; then
  pass "the server dies once established: the client's rdma_disconnect ends in DISCONNECTED, status -110, after $t ms, then TIMEWAIT_EXIT"
else
  fail "a server that dies once established: $(cat "$bin/vanish-est-client.log" | tr '\n' ' ')"
fi

echo "time-wait after a disconnection"
ud_pair timewait 127.0.42.1 "$bin/cm_peer server 127.0.42.1 $port est-disc" 127.0.42.2 "$bin/cm_peer client 127.0.42.1 $port rc-disc"
ts=$(grep -o "TIMEWAIT_EXIT status 0 after [0-9]* ms" "$bin/timewait-server.log" | awk '{print $5}')
tc=$(grep -o "TIMEWAIT_EXIT status 0 after [0-9]* ms" "$bin/timewait-client.log" | awk '{print $5}')
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && [ -n "$ts" ] && [ -n "$tc" ] && [ "$ts" -ge 1000 ] && [ "$tc" -ge 1000 ] \
   && [ "$ts" -lt 2000 ] && [ "$tc" -lt 2000 ]; then
  pass "DISCONNECTED, then TIMEWAIT_EXIT on both sides: ${ts} ms (passive) and ${tc} ms (active) after the disconnection"
else
  fail "time-wait: exits $rc_s/$rc_c: $(cat "$bin/timewait-server.log" "$bin/timewait-client.log" | tr '\n' ' ')"
fi

echo "a slow peer: MRAs (the CM's retries shortened: $cm_fast)"
# The server accepts 2 s after the request, past the client's three REQs (1.6 s): the
# duplicate REQ is answered with an MRA, and the client waits for the REP instead of failing.
rm -f "$bin/mra-req-client.pcap"
ud_pair mra-req 127.0.42.3 "$bin/cm_peer server 127.0.42.3 $port slow-accept" 127.0.42.4 "$bin/cm_peer client 127.0.42.3 $port rc" "" "$cm_fast MLX5SIM_PCAP=$bin/mra-req-client.pcap"
t=$(grep -o "ESTABLISHED status 0 after [0-9]* ms" "$bin/mra-req-client.log" | awk '{print $5}')
names=$(tshark -r "$bin/mra-req-client.pcap" 2> /dev/null | grep -o 'CM: [A-Za-z]*' | sed 's/CM: //' | tr '\n' ' ')
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && [ -n "$t" ] && [ "$t" -ge 2000 ] \
   && echo "$names" | grep -q "^ConnectRequest ConnectRequest MsgRcptAck ConnectReply ReadyToUse " \
   && out=$(tshark_clean "$bin/mra-req-client.pcap"); then
  pass "a server that accepts after 2 s: the duplicate REQ gets an MRA, the client is ESTABLISHED after $t ms; capture ($out packets, clean): $names"
else
  fail "an MRA for a slow accept: exits $rc_s/$rc_c; the CM's: $names; $(cat "$bin/mra-req-server.log" "$bin/mra-req-client.log" | tr '\n' ' ')"
fi
# The client takes its CONNECT_RESPONSE (and sends its RTU) 2 s late: the server's REP,
# timed by the REQ's 16 ms, goes again, and the client's MRA makes the server wait.
rm -f "$bin/mra-rep-server.pcap"
ud_pair mra-rep 127.0.42.5 "$bin/cm_peer server 127.0.42.5 $port est-disc" 127.0.42.6 "$bin/cm_peer client 127.0.42.5 $port rc-slow" "MLX5SIM_PCAP=$bin/mra-rep-server.pcap" "$cm_fast"
names=$(tshark -r "$bin/mra-rep-server.pcap" 2> /dev/null | grep -o 'CM: [A-Za-z]*' | sed 's/CM: //' | tr '\n' ' ')
if [ $rc_s = 0 ] && [ $rc_c = 0 ] && grep -q "ESTABLISHED status 0" "$bin/mra-rep-server.log" \
   && echo "$names" | grep -q "^ConnectRequest ConnectReply ConnectReply MsgRcptAck ReadyToUse "; then
  pass "a client that takes its CONNECT_RESPONSE after 2 s: the REP goes again, the client's MRA holds it, ESTABLISHED on both sides; the server's capture: $names"
else
  fail "an MRA for a slow RTU: exits $rc_s/$rc_c; the CM's: $names; $(cat "$bin/mra-rep-server.log" "$bin/mra-rep-client.log" | tr '\n' ' ')"
fi
