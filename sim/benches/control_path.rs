//! Control-path speed: mkey create + destroy through the trait, the way an application pays
//! for it (provider checks, two PSVs, CREATE_MKEY, and the three destroys).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod scenarios;

fn create_destroy_mkey(c: &mut Criterion) {
    let mut s = scenarios::ControlPath::new();
    let mut group = c.benchmark_group("control_path");
    group.throughput(Throughput::Elements(1));
    group.bench_function("create_destroy_mkey", |b| b.iter(|| s.create_destroy()));
    group.finish();
}

criterion_group!(benches, create_destroy_mkey);
criterion_main!(benches);
