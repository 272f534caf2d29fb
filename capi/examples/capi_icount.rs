//! Instructions per 64-byte RDMA WRITE through the trait and through the C ABI, counted by
//! callgrind (`make bench-icount`): the shim's cost, stable where wall-clock time is not.

use std::process::ExitCode;

#[path = "../../sim/benches/icount/mod.rs"]
mod icount_harness;
#[path = "../benches/scenarios/mod.rs"]
mod scenarios;

use icount_harness::Scenario;

const SCENARIOS: &[Scenario] = &[
    Scenario { name: "trait_rdma_write_64B", ops: 2000, per_op: Some(1), baseline: None },
    Scenario { name: "c_abi_rdma_write_64B", ops: 2000, per_op: Some(1), baseline: Some("trait_rdma_write_64B") },
];

/// The scenario `name`, set up.
fn make(name: &str) -> Result<Box<dyn FnMut()>, String> {
    Ok(match name {
        "trait_rdma_write_64B" => {
            let mut s = scenarios::Trait::new();
            Box::new(move || s.run())
        }
        "c_abi_rdma_write_64B" => {
            let mut s = scenarios::CAbi::new();
            Box::new(move || s.run())
        }
        other => return Err(format!("unknown scenario {other}")),
    })
}

fn main() -> ExitCode {
    scenarios::stepped_shim();
    icount_harness::main(SCENARIOS, make)
}
