//! Classic pcap files (microsecond timestamps, LINKTYPE_ETHERNET) of RoCE v2 packets, for
//! Wireshark and tshark, which dissect UDP port 4791 as RoCE v2 ("RRoCE").

use std::io::{self, Write};

/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;

/// Writes a pcap file: the file header first, then one record per frame.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    frames: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Start a capture on `out` (writes the file header).
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&[0; 8]); // time zone and accuracy: both 0 by convention
        h.extend_from_slice(&65_535u32.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, frames: 0 })
    }

    /// Append an Ethernet frame (without FCS). The simulator has no clock: frame k is
    /// stamped k microseconds after the epoch, which keeps captures reproducible.
    pub fn write_frame(&mut self, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut r = Vec::with_capacity(16);
        r.extend_from_slice(&((self.frames / 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&((self.frames % 1_000_000) as u32).to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        self.out.write_all(&r)?;
        self.out.write_all(frame)?;
        self.frames += 1;
        Ok(())
    }

    /// Append an IP packet (from [`super::encode_ip`]) in an Ethernet frame between two MACs.
    pub fn write_ip(&mut self, src: [u8; 6], dst: [u8; 6], packet: &[u8]) -> io::Result<()> {
        self.write_frame(&ethernet_frame(src, dst, packet))
    }

    /// How many frames are written.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flush what is written.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flush and give back the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// An Ethernet II frame carrying an IP packet: the EtherType (IPv4 or IPv6) comes from the
/// packet's version nibble.
pub fn ethernet_frame(src: [u8; 6], dst: [u8; 6], packet: &[u8]) -> Vec<u8> {
    let ethertype: u16 = if packet.first().map(|b| b >> 4) == Some(6) { 0x86dd } else { 0x0800 };
    let mut f = Vec::with_capacity(14 + packet.len());
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(packet);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_and_record_headers_are_classic_pcap() -> Result<(), Box<dyn std::error::Error>> {
        let mut w = PcapWriter::new(Vec::new())?;
        w.write_ip([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], &[0x45, 0, 0, 20])?;
        assert_eq!(w.frames(), 1);
        let b = w.finish()?;
        assert_eq!(&b[..8], &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]);
        assert_eq!(&b[20..24], &[1, 0, 0, 0], "LINKTYPE_ETHERNET");
        assert_eq!(&b[32..40], &[18, 0, 0, 0, 18, 0, 0, 0], "captured and original lengths");
        assert_eq!(&b[40 + 12..40 + 14], &[0x08, 0x00]);
        assert_eq!(b.len(), 24 + 16 + 18);
        Ok(())
    }
}
