//! Signature speed: a 1 MiB RDMA WRITE through a signature mkey (memory NONE, wire T10-DIF with
//! the CRC guard, CRC32C or CRC64_XP10, 512-byte blocks, cx7) beside crc-fast's CRC of that
//! signature over the same 1 MiB as 2048 blocks of 512 bytes.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

use scenarios::WireSig;

fn signature(c: &mut Criterion) {
    let mut group = c.benchmark_group("signature");
    group.throughput(Throughput::Bytes(scenarios::MIB as u64));
    for (wire, write, raw) in [
        (WireSig::T10dif, "rdma_write_t10dif_1MiB", "raw_crc16_t10dif_1MiB"),
        (WireSig::Crc32c, "rdma_write_crc32c_1MiB", "raw_crc32c_1MiB"),
        (WireSig::Crc64, "rdma_write_crc64_1MiB", "raw_crc64_nvme_1MiB"),
    ] {
        let mut s = scenarios::Signature::with(wire);
        group.bench_function(write, |b| b.iter(|| s.write()));
        group.bench_function(raw, |b| b.iter(|| s.raw_crc()));
        // The floor of any implementation that copies: the CRC, the copy and the PI store.
        group.bench_function(format!("{raw}_then_copy"), |b| b.iter(|| s.raw_crc_copy()));
    }
    group.finish();
}

criterion_group!(benches, signature);
criterion_main!(benches);
