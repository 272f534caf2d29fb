//! The whole suite on each shipped profile, in process, as `mlx5-conformance run` runs it: one
//! fresh simulator per case, each case in a thread of its own. The goal is under a second per
//! profile.

use criterion::{Criterion, criterion_group, criterion_main};
use mlx5_conformance::{Outcome, Target, run_case, suite};
use mlx5_sim::{Profile, ShippedProfiles};

fn whole_suite(c: &mut Criterion) {
    let mut group = c.benchmark_group("suite");
    group.sample_size(10);
    let cases = suite();
    for name in Profile::builtin_names() {
        let target = Target::sim(Profile::builtin(name).expect("shipped profile"));
        let (env, _) = target.probe();
        group.bench_function(name, |b| {
            b.iter(|| {
                let failed = cases.iter().filter(|case| run_case(&target, &env, case).outcome == Outcome::Fail).count();
                // Failures a divergence entry excuses are judged elsewhere; the count keeps the
                // work observable.
                std::hint::black_box(failed)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, whole_suite);
criterion_main!(benches);
