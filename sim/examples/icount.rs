//! Instructions per operation of each benchmarked scenario, counted by callgrind: stable where
//! wall-clock time on a shared machine is not (`make bench-icount`).
//!
//! The harness (`sim/benches/icount`) runs this example under callgrind once per scenario and
//! prints the table; `icount run <scenario> <n>` runs one scenario `n` times.

use std::process::ExitCode;

#[path = "../benches/icount/mod.rs"]
mod icount_harness;
#[path = "../benches/scenarios/mod.rs"]
mod scenarios;

use scenarios::{Cipher, ControlPath, Datapath, MsgRate, Signature, WireSig};

use icount_harness::Scenario;

const SCENARIOS: &[Scenario] = &[
    Scenario { name: "msgrate_1_per_chain", ops: 2000, per_op: Some(1), baseline: None },
    Scenario { name: "msgrate_32_per_chain", ops: 100, per_op: Some(32), baseline: None },
    Scenario { name: "memcpy_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "datapath_write_indirect_1MiB", ops: 4, per_op: None, baseline: Some("memcpy_1MiB") },
    Scenario { name: "raw_crc16_t10dif_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "signature_write_t10dif_1MiB", ops: 4, per_op: None, baseline: Some("raw_crc16_t10dif_1MiB") },
    Scenario { name: "raw_crc32c_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "signature_write_crc32c_1MiB", ops: 4, per_op: None, baseline: Some("raw_crc32c_1MiB") },
    Scenario { name: "raw_crc64_nvme_1MiB", ops: 4, per_op: None, baseline: None },
    Scenario { name: "signature_write_crc64_1MiB", ops: 4, per_op: None, baseline: Some("raw_crc64_nvme_1MiB") },
    Scenario { name: "raw_aes_256_1MiB", ops: 2, per_op: None, baseline: None },
    Scenario { name: "raw_xts_aes_256_1MiB", ops: 2, per_op: None, baseline: None },
    Scenario { name: "crypto_write_aes_xts_256_1MiB", ops: 2, per_op: None, baseline: Some("raw_xts_aes_256_1MiB") },
    Scenario { name: "crypto_write_t10dif_aes_xts_1MiB", ops: 2, per_op: None, baseline: None },
    Scenario { name: "control_path_create_destroy_mkey", ops: 500, per_op: None, baseline: None },
];

/// The scenario `name`, set up.
fn make(name: &str) -> Result<Box<dyn FnMut()>, String> {
    Ok(match name {
        "msgrate_1_per_chain" => {
            let mut s = MsgRate::new(1);
            Box::new(move || s.run())
        }
        "msgrate_32_per_chain" => {
            let mut s = MsgRate::new(32);
            Box::new(move || s.run())
        }
        "datapath_write_indirect_1MiB" => {
            let mut s = Datapath::new();
            Box::new(move || s.write())
        }
        "memcpy_1MiB" => {
            let mut s = Datapath::new();
            Box::new(move || s.memcpy())
        }
        "signature_write_t10dif_1MiB" => signature_write(WireSig::T10dif),
        "signature_write_crc32c_1MiB" => signature_write(WireSig::Crc32c),
        "signature_write_crc64_1MiB" => signature_write(WireSig::Crc64),
        "raw_crc16_t10dif_1MiB" => raw_crc(WireSig::T10dif),
        "raw_crc32c_1MiB" => raw_crc(WireSig::Crc32c),
        "raw_crc64_nvme_1MiB" => raw_crc(WireSig::Crc64),
        "raw_aes_256_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.raw_aes())
        }
        "crypto_write_aes_xts_256_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.write_plain())
        }
        "raw_xts_aes_256_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.raw_xts())
        }
        "crypto_write_t10dif_aes_xts_1MiB" => {
            let mut s = Cipher::new();
            Box::new(move || s.write_signed())
        }
        "control_path_create_destroy_mkey" => {
            let mut s = ControlPath::new();
            Box::new(move || s.create_destroy())
        }
        other => return Err(format!("unknown scenario {other}")),
    })
}

fn signature_write(wire: WireSig) -> Box<dyn FnMut()> {
    let mut s = Signature::with(wire);
    Box::new(move || s.write())
}

fn raw_crc(wire: WireSig) -> Box<dyn FnMut()> {
    let s = Signature::with(wire);
    Box::new(move || {
        s.raw_crc();
    })
}

fn main() -> ExitCode {
    icount_harness::main(SCENARIOS, make)
}
