//! Signature speed: a 1 MiB RDMA WRITE through a signature mkey (memory NONE, wire T10-DIF with
//! the CRC guard, 512-byte blocks) beside crc-fast's T10-DIF CRC over the same 1 MiB as 2048
//! blocks of 512 bytes.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn signature(c: &mut Criterion) {
    let mut s = scenarios::Signature::new();
    let mut group = c.benchmark_group("signature");
    group.throughput(Throughput::Bytes(scenarios::MIB as u64));
    group.bench_function("rdma_write_t10dif_1MiB", |b| b.iter(|| s.write()));
    group.bench_function("raw_crc16_t10dif_1MiB", |b| b.iter(|| s.raw_crc()));
    group.finish();
}

criterion_group!(benches, signature);
criterion_main!(benches);
