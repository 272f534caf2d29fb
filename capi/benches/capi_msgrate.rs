//! 64-byte RDMA WRITEs posted and polled through the C ABI (the context's `post_send` and
//! `poll_cq` ops, as the header's inline `ibv_post_send` and `ibv_poll_cq` call them) beside
//! the same through the trait, in one run: the shim's cost per message, with the device run
//! inside the calls (stepped) as the trait runs it.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn capi_msgrate(c: &mut Criterion) {
    scenarios::stepped_shim();
    let mut group = c.benchmark_group("capi_msgrate");
    group.throughput(Throughput::Elements(1));
    // Both set up before either runs, so neither runs beside a fresher heap.
    let mut t = scenarios::Trait::new();
    let mut x = scenarios::CAbi::new();
    group.bench_function("c_abi_rdma_write_64B", |b| b.iter(|| x.run()));
    group.bench_function("trait_rdma_write_64B", |b| b.iter(|| t.run()));
    group.finish();
}

criterion_group!(benches, capi_msgrate);
criterion_main!(benches);
