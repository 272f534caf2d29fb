#!/usr/bin/env python3
"""Print the CM MADs and UD SENDs of a capture (RoCE v2 over IPv4), one line each:
`SIDR_REQ request_id service_id`, `SIDR_REP request_id status qpn qkey`, or
`UD dest_qp qkey`, read by field offset (tshark names SIDR's MADs but does not dissect them).

    pcap_mads.py FILE
"""
import struct
import sys


def frames(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 24
    while at + 16 <= len(data):
        incl = struct.unpack_from("<I", data, at + 8)[0]
        yield data[at + 16:at + 16 + incl]
        at += 16 + incl


def main():
    for fr in frames(sys.argv[1]):
        bth = 14 + 20 + 8
        if len(fr) < bth + 20:
            continue
        dest_qp = struct.unpack_from(">I", fr, bth + 4)[0] & 0xFFFFFF
        qkey = struct.unpack_from(">I", fr, bth + 12)[0]
        mad = fr[bth + 20:]
        if dest_qp == 1 and len(mad) >= 256 and mad[1] == 0x07:
            attr = struct.unpack_from(">H", mad, 16)[0]
            m = mad[24:]
            if attr == 0x17:
                print("SIDR_REQ %#x %#x" % (struct.unpack_from(">I", m, 0)[0], struct.unpack_from(">Q", m, 8)[0]))
            elif attr == 0x18:
                rid, = struct.unpack_from(">I", m, 0)
                qpn = struct.unpack_from(">I", m, 8)[0] >> 8
                print("SIDR_REP %#x %d %#x %#x" % (rid, m[4], qpn, struct.unpack_from(">I", m, 20)[0]))
        elif dest_qp != 1:
            print("UD %#x %#x" % (dest_qp, qkey))


main()
