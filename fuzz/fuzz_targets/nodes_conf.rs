//! Fuzz target: nodes.conf loading (ferrocluster-topology).
//!
//! Properties: loading arbitrary bytes never panics (a typed error or a model); a loaded model
//! can be saved and the saved text loads again; after one save/load cycle (which drops
//! handshake nodes and materialises nodes that were only referenced), saving is a fixed point.
#![no_main]

use ferrocluster_topology::{load_nodes_conf, save_nodes_conf, LoadOptions, Millis};
use libfuzzer_sys::fuzz_target;
use rand_chacha::rand_core::SeedableRng;

fuzz_target!(|data: &[u8]| {
    let opts = LoadOptions {
        preserve_times: true,
        ..Default::default()
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let Ok(first) = load_nodes_conf(data, Millis(1), &mut rng, opts) else {
        return;
    };
    first
        .check_invariants()
        .expect("a loaded model keeps its invariants");
    let text1 = save_nodes_conf(&first);
    let second = load_nodes_conf(text1.as_bytes(), Millis(1), &mut rng, opts)
        .expect("a saved model loads again");
    let text2 = save_nodes_conf(&second);
    let third = load_nodes_conf(text2.as_bytes(), Millis(1), &mut rng, opts)
        .expect("a saved model loads again");
    assert_eq!(
        save_nodes_conf(&third),
        text2,
        "save is a fixed point after one cycle"
    );
});
