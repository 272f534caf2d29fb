//! Data-path speed: one 1 MiB RDMA WRITE through an indirect mkey with a 16-entry list layout,
//! posted and completed, beside a plain copy of the same bytes.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn datapath(c: &mut Criterion) {
    let mut s = scenarios::Datapath::new();
    let mut group = c.benchmark_group("datapath");
    group.throughput(Throughput::Bytes(scenarios::MIB as u64));
    group.bench_function("rdma_write_indirect_1MiB", |b| b.iter(|| s.write()));
    group.bench_function("memcpy_1MiB", |b| b.iter(|| s.memcpy()));
    group.finish();
}

criterion_group!(benches, datapath);
criterion_main!(benches);
