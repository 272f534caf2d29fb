//! Message rate: post + poll of 64-byte RDMA WRITEs over a loopback RC QP pair through the
//! trait, one WR per `post_send` chain and 32 per chain; throughput in messages.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn msgrate(c: &mut Criterion) {
    let mut group = c.benchmark_group("msgrate");
    for per_chain in [1, 32] {
        let mut s = scenarios::MsgRate::new(per_chain);
        group.throughput(Throughput::Elements(per_chain as u64));
        group.bench_function(format!("rdma_write_64B_{per_chain}_per_chain"), |b| b.iter(|| s.run()));
    }
    group.finish();
}

criterion_group!(benches, msgrate);
criterion_main!(benches);
