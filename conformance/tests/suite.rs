//! The conformance suite under `cargo test`: one trial per (profile, case). A case that cannot
//! run on a profile is reported as ignored with its reason, never as passed.

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use mlx5_conformance::harness::divergence::SHIPPED;
use mlx5_conformance::{Divergences, Outcome, Target, run_case, suite};
use mlx5_sim::{Profile, ShippedProfiles};
use std::sync::Arc;

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let names: Vec<&str> = suite().iter().map(|c| c.name).collect();
    let table = match Divergences::parse(SHIPPED, &names) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            let trial = Trial::test("the shipped divergence table parses", move || Err(Failed::from(e)));
            libtest_mimic::run(&args, vec![trial]).exit()
        }
    };
    for name in Profile::builtin_names() {
        let profile = match Profile::builtin(name) {
            Ok(p) => p,
            Err(e) => {
                let msg = e.to_string();
                trials.push(Trial::test(format!("[sim/{name}] profile loads"), move || Err(Failed::from(msg))));
                continue;
            }
        };
        let target = Arc::new(Target::sim(profile));
        let (env, _) = target.probe();
        let env = Arc::new(env);
        for case in suite() {
            let (target, env, table) = (Arc::clone(&target), Arc::clone(&env), Arc::clone(&table));
            trials.push(
                Trial::ignorable_test(format!("[{}] {}", target.label(), case.name), move || {
                    let mut r = run_case(&target, &env, &case);
                    table.judge(&target.backend, target.profile.as_deref(), &mut r);
                    match r.outcome {
                        Outcome::Pass => Ok(Completion::Completed),
                        Outcome::Skip | Outcome::Xfail => Ok(Completion::ignored_with(r.detail)),
                        Outcome::Fail => Err(Failed::from(r.detail)),
                    }
                })
                .with_kind("sim"),
            );
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
