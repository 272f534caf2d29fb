//! Crypto speed: a 1 MiB RDMA WRITE through a crypto mkey (AES-XTS-256, 4096-byte data
//! units, memory plaintext, wire ciphertext) beside xts-mode over the same 1 MiB in the same
//! run, AES-256 alone over the same 1 MiB (the ceiling), and a 1 MiB WRITE through a signature + crypto mkey (wire T10-DIF every 512 bytes,
//! encrypted with the data in 520-byte units).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn crypto(c: &mut Criterion) {
    let mut s = scenarios::Cipher::new();
    let mut group = c.benchmark_group("crypto");
    group.throughput(Throughput::Bytes(scenarios::MIB as u64));
    group.bench_function("rdma_write_aes_xts_256_4096_1MiB", |b| b.iter(|| s.write_plain()));
    group.bench_function("raw_xts_mode_aes_256_4096_1MiB", |b| b.iter(|| s.raw_xts()));
    group.bench_function("raw_aes_256_1MiB", |b| b.iter(|| s.raw_aes()));
    group.bench_function("rdma_write_t10dif_then_aes_xts_256_520_1MiB", |b| b.iter(|| s.write_signed()));
    group.finish();
}

criterion_group!(benches, crypto);
criterion_main!(benches);
