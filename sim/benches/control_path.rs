//! Control-path speed: mkey create + destroy through the trait, the way an application pays
//! for it (provider checks, two PSVs, CREATE_MKEY, and the three destroys).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mlx5_dv::{Backend, MkeyInitAttr, MkeyInitFlags};
use mlx5_sim::Simulator;
use std::hint::black_box;

fn create_destroy_mkey(c: &mut Criterion) {
    let mut sim = Simulator::with_profile("cx6dx").expect("shipped profile");
    let backend: &mut dyn Backend = &mut sim;
    let ctx = backend.open_device("mlx5_0", None).expect("open");
    let pd = backend.alloc_pd(ctx).expect("pd");
    let attr =
        MkeyInitAttr { pd, create_flags: MkeyInitFlags::BLOCK_SIGNATURE | MkeyInitFlags::INDIRECT, max_entries: 16 };
    let mut group = c.benchmark_group("control_path");
    group.throughput(Throughput::Elements(1));
    group.bench_function("create_destroy_mkey", |b| {
        b.iter(|| {
            let mkey = backend.create_mkey(black_box(&attr)).expect("create");
            backend.destroy_mkey(black_box(&mkey)).expect("destroy");
        })
    });
    group.finish();
}

criterion_group!(benches, create_destroy_mkey);
criterion_main!(benches);
